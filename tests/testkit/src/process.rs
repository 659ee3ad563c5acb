//! Child processes the kit starts: each in its own process group, its output in a log file, and
//! stopped with the whole group when dropped.
//!
//! Dropping is not enough on its own: clusters shared by a test binary live in statics, which are
//! never dropped, and a test binary can be killed outright. So every group is also registered with
//! a reaper, a tiny shell process that reads group ids on its stdin and kills every group still
//! registered once that stdin reaches end of file, which the kernel guarantees whenever this
//! process exits, however it exits.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::Error;

/// How long a process gets to exit after SIGTERM before its group is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Registers every process group with the reaper. The string is a POSIX shell script: it ignores
/// terminal signals (Ctrl-C goes to the owner, which stops its children itself) and on EOF kills
/// what is still registered, then removes the directories registered with `=path` (the data of
/// environments that live in statics, which are never dropped: without this every test run
/// would leave its etcd and PostgreSQL data behind).
const REAPER_SCRIPT: &str = r#"
trap '' INT TERM HUP QUIT
groups=""
dirs=""
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups ${line#+}" ;;
    -*) g=${line#-}; rest=""
        for x in $groups; do [ "$x" = "$g" ] || rest="$rest $x"; done
        groups=$rest ;;
    =*) dirs="$dirs
${line#=}" ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
if [ -n "$dirs" ]; then
  sleep 1
  printf '%s\n' "$dirs" | while IFS= read -r d; do [ -n "$d" ] && rm -rf -- "$d"; done
fi
"#;

struct Reaper {
    stdin: Mutex<ChildStdin>,
    // Kept so the reaper is not reported as a zombie we forgot; it outlives us by design.
    _child: Child,
}

fn reaper() -> Result<&'static Reaper, Error> {
    static REAPER: OnceLock<Result<Reaper, String>> = OnceLock::new();
    REAPER
        .get_or_init(|| {
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(REAPER_SCRIPT)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("cannot start the process reaper (sh): {e}"))?;
            let stdin = child.stdin.take().ok_or("the reaper has no stdin")?;
            Ok(Reaper {
                stdin: Mutex::new(stdin),
                _child: child,
            })
        })
        .as_ref()
        .map_err(|e| Error::Process(e.clone()))
}

fn tell_reaper(line: String) -> Result<(), Error> {
    let reaper = reaper()?;
    let mut stdin = reaper
        .stdin
        .lock()
        .map_err(|_| Error::Process("reaper lock poisoned".into()))?;
    writeln!(stdin, "{line}").map_err(|e| Error::Process(format!("cannot talk to the reaper: {e}")))
}

/// Has `dir` removed when this process exits, however it exits (after its processes are killed).
pub(crate) fn remove_at_exit(dir: &Path) -> Result<(), Error> {
    let path = dir.display().to_string();
    if path.contains('\n') {
        return Err(Error::Process(format!("{path:?}: a newline in a path")));
    }
    tell_reaper(format!("={path}"))
}

/// A running child process owned by the kit.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
    stopped: bool,
}

impl ManagedProcess {
    /// Starts `command` in a new process group with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> Result<Self, Error> {
        // Start the reaper before the child, so no child can exist unregistered.
        reaper()?;
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| Error::io(format!("open log {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io("clone log handle", e))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(format!("start {name} ({:?})", command.get_program()), e))?;
        tell_reaper(format!("+{}", child.id()))?;
        tracing::debug!(process = name, pid = child.id(), log = %log.display(), "started");
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
            stopped: false,
        })
    }

    /// The name the process was started under, e.g. `east/kube-apiserver`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its stdout and stderr go.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `Err` with the exit status and the end of the log when the process has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log_tail: tail(&self.log, 30),
            }),
            Err(e) => Err(Error::io(format!("wait for {}", self.name), e)),
        }
    }

    /// Resident memory of the whole process group in bytes (PostgreSQL forks workers).
    pub fn resident_bytes(&self) -> u64 {
        group_resident_bytes(self.pid())
    }

    /// Asks the process group to exit (SIGTERM) without waiting, so that several processes can
    /// shut down at once before [`stop`](Self::stop) waits for each.
    pub fn terminate(&self) {
        if !self.stopped {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        }
    }

    /// Freezes the process group (SIGSTOP): it holds its connections and answers nothing, as a
    /// host that stopped responding would, until [`thaw`](Self::thaw).
    pub fn freeze(&self) {
        if !self.stopped {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGSTOP);
        }
    }

    /// Lets a [`freeze`](Self::freeze)d process group run again (SIGCONT).
    pub fn thaw(&self) {
        if !self.stopped {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGCONT);
        }
    }

    /// Kills the process group outright (SIGKILL), as a crash would, and reaps it. Idempotent.
    pub fn kill(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let pgid = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = tell_reaper(format!("-{}", pgid));
        tracing::debug!(process = %self.name, "killed");
    }

    /// Stops the process group: SIGTERM, then SIGKILL after a grace period. Idempotent.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let pgid = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pgid, Signal::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The leader may be gone while workers of its group linger: kill the group regardless.
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = tell_reaper(format!("-{}", pgid));
        tracing::debug!(process = %self.name, "stopped");
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of a log file (empty if it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    const MAX_BYTES: u64 = 64 * 1024;
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(MAX_BYTES)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Sum of VmRSS over every process whose process group is `pgid`.
fn group_resident_bytes(pgid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group_of(*pid) == Some(pgid))
        .map(resident_bytes_of)
        .sum()
}

fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

fn resident_bytes_of(pid: u32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// True when a process with this pid exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_returns_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail(&path, 2), "c\nd");
        assert_eq!(tail(&path, 10), "a\nb\nc\nd");
        assert_eq!(tail(&dir.path().join("missing"), 3), "");
    }

    #[test]
    fn dropping_a_process_kills_its_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        // The child forks a grandchild in the same group and waits.
        cmd.arg("-c")
            .arg("sleep 300 & echo $! > grandchild; wait")
            .current_dir(dir.path());
        let process = ManagedProcess::spawn("sleeper", cmd, dir.path().join("log")).unwrap();
        let pid = process.pid();
        let grandchild_file = dir.path().join("grandchild");
        let deadline = Instant::now() + Duration::from_secs(5);
        // The shell makes the file before it writes the pid into it: wait for the pid.
        let read = || std::fs::read_to_string(&grandchild_file).unwrap_or_default();
        while read().trim().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let grandchild: u32 = read().trim().parse().unwrap();
        assert!(is_alive(pid) && is_alive(grandchild));
        drop(process);
        assert!(!is_alive(pid), "the leader survived");
        // The group's SIGKILL is delivered at once, but the grandchild (not our child, so not
        // waited for) may take a moment to be scheduled and die on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(5);
        while is_alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!is_alive(grandchild), "the grandchild survived");
    }
}
