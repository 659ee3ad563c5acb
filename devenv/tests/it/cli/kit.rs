//! The `kubenest` binary as the test runs it: its own configuration directory, the commands it
//! ran, and the files commands read.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use clap::CommandFactory;
use serde_json::Value;

use crate::common;

/// The binary with a configuration directory of its own (contexts, no session file), and the
/// commands it ran.
pub struct Kubenest {
    pub config: tempfile::TempDir,
    pub ran: BTreeSet<String>,
}

/// What a command did.
pub struct Ran {
    pub status: i32,
    stdout: String,
    stderr: String,
}

impl Kubenest {
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(common::cli());
        command
            .args(args)
            .env("XDG_CONFIG_HOME", self.config.path())
            .env("NO_COLOR", "1")
            .env_remove("KUBENEST_SESSION")
            .env_remove("KUBENEST_API")
            .env_remove("KUBENEST_ORG")
            .env_remove("KUBENEST_CONTEXT")
            .env_remove("KUBENEST_CA_FILE");
        command
    }

    /// Runs `args` with `stdin`; notes which command it was.
    pub fn run(&mut self, args: &[&str], stdin: &str) -> Ran {
        self.ran.insert(path_of(args));
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out: Output = child.wait_with_output().unwrap();
        Ran {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `args` and wants exit status `want`; returns standard output.
    pub fn expect(&mut self, want: i32, args: &[&str]) -> String {
        self.expect_in(want, args, "")
    }

    pub fn expect_in(&mut self, want: i32, args: &[&str], stdin: &str) -> String {
        let ran = self.run(args, stdin);
        assert_eq!(
            ran.status,
            want,
            "kubenest {}: {}{}",
            args.join(" "),
            ran.stdout,
            ran.stderr
        );
        ran.stdout
    }

    pub fn ok(&mut self, args: &[&str]) -> String {
        self.expect(0, args)
    }

    pub fn json(&mut self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }
}

/// The command words of `args` (`apps secret set`), by the CLI's own tree.
fn path_of(args: &[&str]) -> String {
    let mut command = kubenest_cli::Cli::command();
    let mut path = Vec::new();
    for arg in args {
        match command.find_subcommand(arg) {
            Some(sub) => {
                path.push(*arg);
                command = sub.clone();
            }
            None if arg.starts_with('-') || path.is_empty() => {}
            None => break,
        }
    }
    path.join(" ")
}

/// Every command a user can run (the leaves of the tree).
pub fn every_command() -> BTreeSet<String> {
    fn walk(command: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
        let subs: Vec<&clap::Command> = command
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        if subs.is_empty() {
            out.insert(prefix.trim().to_owned());
        }
        for sub in subs {
            walk(sub, &format!("{prefix} {}", sub.get_name()), out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&kubenest_cli::Cli::command(), "", &mut out);
    out
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

pub fn app_file(dir: &Path, project: &str, image: &str) -> String {
    write(
        dir,
        "app.yaml",
        &format!(
            "name: web\nproject: {project}\ncomponents:\n- name: web\n  type: workload\n  \
             workload_spec:\n    image: {image}\n    replicas: 1\n    port: 8080\n"
        ),
    )
}

/// A CA certificate and key for `projects ingress-ca set`, made by openssl.
pub fn ingress_ca(dir: &Path) -> (String, String) {
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "30", "-subj", "/CN=cli test CA"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    (cert.display().to_string(), key.display().to_string())
}
