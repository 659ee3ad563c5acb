//! The one way kubenest starts an external program (helm, git): every call site describes the
//! command with [`Program`], and only this module spawns it.
//!
//! What it guarantees, so no call site has to remember it:
//! - **No user value where a flag can be.** Words a caller fixes are `&'static str`
//!   ([`Program::arg`]); a value that came from anyone else is either an option's value, joined
//!   to its flag as one word (`--version=…`, [`Program::option`]), or an operand after `--`
//!   ([`Program::operands`]), or a word of its own that cannot start with `-`
//!   ([`Program::word`]). A file the caller made is passed by absolute path
//!   ([`Program::path`]).
//! - **A cleared environment**: the program sees `PATH` and the variables the caller names,
//!   nothing of the parent's (no tokens, no proxy settings, no `HOME`).
//! - **A timeout** that kills the program's whole process group (helm and git start children).
//! - **Bounded output**: at most [`Program::max_output`] bytes of stdout and of stderr are kept;
//!   the rest is read and dropped, so a chatty program neither blocks nor fills memory.
//! - **What may be shown**: [`Output::summary`] is the first non-empty line of stderr, cut and
//!   stripped of control characters; the whole output goes to the log, never to a status or an
//!   answer.
//!
//! Written by hand because tokio's `Command` gives the pieces (process groups, `kill_on_drop`,
//! piped output) but none of these rules; the rules are the point.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The `PATH` every program gets.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How much of stdout and of stderr is kept unless a caller says otherwise.
pub const DEFAULT_MAX_OUTPUT: usize = 16 << 20;

/// The longest [`Output::summary`].
pub const SUMMARY_CHARS: usize = 300;

/// Why a program could not be run or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{program}: an argument is not an absolute path: {path}")]
    RelativePath { program: String, path: String },
    #[error("{program}: {word:?} could be read as a flag")]
    BadWord { program: String, word: String },
    #[error("{program}: an option value holds a NUL")]
    BadValue { program: String },
    #[error("{program} could not be started: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not finish within {seconds}s and was stopped")]
    TimedOut { program: String, seconds: u64 },
    #[error("{program}: reading its output: {source}")]
    Read {
        program: String,
        source: std::io::Error,
    },
}

/// One run of an external program, described before it starts.
#[derive(Debug)]
pub struct Program {
    bin: PathBuf,
    args: Vec<OsString>,
    operands: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    dir: Option<PathBuf>,
    timeout: Duration,
    max_output: usize,
    invalid: Option<ExecError>,
}

/// What a program left when it ended.
#[derive(Debug, Clone)]
pub struct Output {
    pub success: bool,
    /// The exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Whether stdout or stderr was longer than the bound and was cut.
    pub truncated: bool,
}

impl Program {
    /// `bin` with no arguments, the environment cleared, a 60-second timeout.
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self {
            bin: bin.into(),
            args: Vec::new(),
            operands: Vec::new(),
            env: Vec::new(),
            dir: None,
            timeout: Duration::from_secs(60),
            max_output: DEFAULT_MAX_OUTPUT,
            invalid: None,
        }
    }

    fn name(&self) -> String {
        self.bin.file_name().map_or_else(
            || self.bin.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// A word the caller fixes: a subcommand or a flag (`template`, `--quiet`).
    pub fn arg(mut self, word: &'static str) -> Self {
        self.args.push(word.into());
        self
    }

    /// An option with a value from anywhere, as one word `flag=value`: the value can never be
    /// read as a flag of its own. A NUL in it (which no argument can hold) refuses the run.
    pub fn option(mut self, flag: &'static str, value: impl AsRef<OsStr>) -> Self {
        let value = value.as_ref();
        if value.as_encoded_bytes().contains(&b'\0') {
            self.invalid.get_or_insert(ExecError::BadValue {
                program: self.name(),
            });
        }
        let mut word = OsString::from(flag);
        word.push("=");
        word.push(value);
        self.args.push(word);
        self
    }

    /// A value from anywhere as one word of its own (an address, a device name): refused when
    /// it starts with `-` (it could be read as a flag) or holds a NUL.
    pub fn word(mut self, value: impl AsRef<OsStr>) -> Self {
        let value = value.as_ref();
        let bytes = value.as_encoded_bytes();
        if bytes.first() == Some(&b'-') || bytes.contains(&b'\0') {
            self.invalid.get_or_insert(ExecError::BadWord {
                program: self.name(),
                word: value.to_string_lossy().chars().take(40).collect(),
            });
        }
        self.args.push(value.to_owned());
        self
    }

    /// An option whose value is a file the caller made, by absolute path.
    pub fn path_option(self, flag: &'static str, path: &Path) -> Self {
        let checked = self.check_absolute(path);
        checked.option(flag, path)
    }

    /// A file or folder the caller made, by absolute path (so it never starts with `-`).
    pub fn path(mut self, path: &Path) -> Self {
        self = self.check_absolute(path);
        self.args.push(path.as_os_str().to_owned());
        self
    }

    fn check_absolute(mut self, path: &Path) -> Self {
        if !path.is_absolute() {
            self.invalid.get_or_insert(ExecError::RelativePath {
                program: self.name(),
                path: path.display().to_string(),
            });
        }
        self
    }

    /// Operands from anywhere: they follow `--`, after every flag, so none is read as one.
    pub fn operands<I, S>(mut self, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.operands
            .extend(values.into_iter().map(|v| v.as_ref().to_owned()));
        self
    }

    /// Values from anywhere after a separator word of the program's own (git's
    /// `--end-of-options`), for commands where `--` would mean something else; later
    /// arguments may follow them.
    pub fn after<I, S>(mut self, separator: &'static str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.push(separator.into());
        self.args
            .extend(values.into_iter().map(|v| v.as_ref().to_owned()));
        self
    }

    /// A variable of the program's environment (the only ones it gets, beside `PATH`).
    pub fn env(mut self, key: &'static str, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key, value.as_ref().to_owned()));
        self
    }

    /// The folder the program runs in.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// How long the program may run before its process group is killed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most bytes of stdout, and of stderr, that are kept.
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// The command line as it will run (for logs and tests).
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv = self.args.clone();
        if !self.operands.is_empty() {
            argv.push("--".into());
            argv.extend(self.operands.iter().cloned());
        }
        argv
    }

    /// Runs the program to its end (or its timeout) and returns what it left.
    pub async fn run(self) -> Result<Output, ExecError> {
        if let Some(invalid) = self.invalid {
            return Err(invalid);
        }
        let program = self.name();
        let mut command = tokio::process::Command::new(&self.bin);
        command
            .args(self.argv())
            .env_clear()
            .env("PATH", PATH)
            .envs(self.env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so the timeout ends what it started too.
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        let mut child = command.spawn().map_err(|source| ExecError::Spawn {
            program: program.clone(),
            source,
        })?;
        let group = child.id();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let limit = self.max_output;
        let work = async {
            let (out, err, status) =
                tokio::join!(bounded(stdout, limit), bounded(stderr, limit), child.wait());
            (out, err, status)
        };
        let Ok((out, err, status)) = tokio::time::timeout(self.timeout, work).await else {
            if let Some(group) = group {
                kill_group(group);
            }
            return Err(ExecError::TimedOut {
                program,
                seconds: self.timeout.as_secs(),
            });
        };
        let read = |e| ExecError::Read {
            program: program.clone(),
            source: e,
        };
        let (stdout, cut_out) = out.map_err(read)?;
        let (stderr, cut_err) = err.map_err(read)?;
        let status = status.map_err(read)?;
        Ok(Output {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
            truncated: cut_out || cut_err,
        })
    }
}

/// Kills every process of group `group` (the program and what it started).
fn kill_group(group: u32) {
    if let Ok(group) = i32::try_from(group) {
        // Gone already is fine: the group ended on its own.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Reads `pipe` to its end, keeping at most `limit` bytes; says whether it cut.
async fn bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    limit: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let Some(mut pipe) = pipe else {
        return Ok((Vec::new(), false));
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buffer = [0u8; 8192];
    loop {
        let n = pipe.read(&mut buffer).await?;
        if n == 0 {
            return Ok((kept, cut));
        }
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&buffer[..n.min(room)]);
        cut |= n > room;
    }
}

impl Output {
    /// The first non-empty line of stderr (or stdout when stderr is empty), without helm's and
    /// git's `Error: `/`fatal: ` prefixes, control characters replaced, at most
    /// [`SUMMARY_CHARS`] characters: what a status or an answer may show of a failure.
    pub fn summary(&self) -> String {
        summary(if self.stderr.iter().any(|b| !b.is_ascii_whitespace()) {
            &self.stderr
        } else {
            &self.stdout
        })
    }
}

/// [`Output::summary`] of any program's text.
pub fn summary(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = ["Error: ", "error: ", "fatal: "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .unwrap_or(line);
    let mut out: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SUMMARY_CHARS)
        .collect();
    if line.chars().count() > SUMMARY_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_values_are_joined_to_their_flag_or_follow_the_separator() {
        let program = Program::new("/usr/bin/helm")
            .arg("template")
            .option("--version", "--post-renderer=/bin/sh")
            .path(Path::new("/tmp/values.yaml"))
            .operands(["release", "--debug"]);
        let argv: Vec<String> = program
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "template",
                "--version=--post-renderer=/bin/sh",
                "/tmp/values.yaml",
                "--",
                "release",
                "--debug"
            ]
        );
    }

    #[tokio::test]
    async fn a_relative_path_or_a_nul_in_a_value_refuses_the_run() {
        let relative = Program::new("/bin/true").path(Path::new("-rf")).run().await;
        assert!(matches!(relative, Err(ExecError::RelativePath { .. })));
        let broken = Program::new("/bin/true").option("--x", "a\0b").run().await;
        assert!(matches!(broken, Err(ExecError::BadValue { .. })));
        let flag = Program::new("/bin/true").word("--all").run().await;
        assert!(matches!(flag, Err(ExecError::BadWord { .. })));
        let nul = Program::new("/bin/true").word("eth0\0").run().await;
        assert!(matches!(nul, Err(ExecError::BadWord { .. })));
        let fine = Program::new("/bin/true").word("10.0.0.1/24").run().await;
        assert!(fine.is_ok_and(|o| o.success));
    }

    #[tokio::test]
    async fn the_environment_is_cleared_to_what_the_caller_names() {
        let output = Program::new("/usr/bin/env")
            .env("HELM_CACHE_HOME", "/tmp/x")
            .run()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        let mut names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort_unstable();
        assert_eq!(names, ["HELM_CACHE_HOME", "PATH"]);
    }

    #[tokio::test]
    async fn output_is_bounded_and_a_program_past_its_time_is_stopped_with_its_children() {
        let output = Program::new("/bin/sh")
            .arg("-c")
            .arg("head -c 100000 /dev/zero; echo done >&2")
            .max_output(1000)
            .run()
            .await
            .unwrap();
        assert_eq!(output.stdout.len(), 1000);
        assert!(output.truncated);
        assert_eq!(output.summary(), "done");

        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let script = "sleep 2 && touch \"$MARKER\" & sleep 30";
        let slow = Program::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("MARKER", &marker)
            .timeout(Duration::from_millis(300))
            .run()
            .await;
        assert!(matches!(slow, Err(ExecError::TimedOut { .. })), "{slow:?}");
        // The child the shell started went with it: the marker never appears.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!marker.exists());
    }

    #[test]
    fn a_summary_is_one_clean_bounded_line() {
        assert_eq!(
            summary(b"\n\nError: chart not found\nmore"),
            "chart not found"
        );
        assert_eq!(summary(b"fatal: bad \x1b[31mref\n"), "bad  [31mref");
        let long = "x".repeat(1000);
        assert_eq!(summary(long.as_bytes()).chars().count(), SUMMARY_CHARS + 1);
    }
}
