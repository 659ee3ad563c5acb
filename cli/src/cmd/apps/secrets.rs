//! `kubenest apps secret` and `kubenest apps git-credentials`: what a component reads as
//! secret environment, and a Git workload's repository credentials. Values come from a file or
//! standard input, never from the command line (which `ps` and shell histories show), and the
//! API never answers them back: only the keys.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;

use kubenest_api::apps::{GitCredentialsBody, GitCredentialsResponse, SecretBody, SecretResponse};
use serde_json::Value;

use super::{AppArg, resolve};
use crate::api;
use crate::cmd::{Global, secret_input};

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Set keys of a component's secret (other keys are kept) from a file: `KEY=VALUE` lines
    /// (an env file) or a YAML/JSON mapping; `-` for standard input.
    Set {
        #[command(flatten)]
        target: Target,
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Remove keys of a component's secret (all of them without --key).
    Delete {
        #[command(flatten)]
        target: Target,
        #[arg(long = "key")]
        keys: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum GitCredentialsCommand {
    /// Set a Git workload's repository credentials: a username with a password or token on
    /// standard input (https), or an ssh key file with the server's known_hosts file (ssh).
    Set {
        #[command(flatten)]
        target: Target,
        #[arg(long, requires = "password_stdin", conflicts_with = "ssh_key_file")]
        username: Option<String>,
        /// Read the password or token from standard input.
        #[arg(long)]
        password_stdin: bool,
        /// An OpenSSH private key file.
        #[arg(long, requires = "known_hosts_file")]
        ssh_key_file: Option<PathBuf>,
        /// The Git server's host keys, as `known_hosts` lines.
        #[arg(long)]
        known_hosts_file: Option<PathBuf>,
    },
    /// Remove a Git workload's repository credentials.
    Delete {
        #[command(flatten)]
        target: Target,
    },
}

/// An App's component.
#[derive(Debug, Clone, Args)]
pub struct Target {
    #[command(flatten)]
    pub app: AppArg,
    /// The component.
    #[arg(short = 'c', long)]
    pub component: String,
}

async fn path(
    global: &Global,
    client: &mut api::Client,
    target: &Target,
    what: &str,
) -> anyhow::Result<String> {
    let id = resolve(global, client, &target.app).await?;
    Ok(format!(
        "/api/v1/apps/{id}/components/{}/{what}",
        api::query_value(&target.component)
    ))
}

/// `KEY=VALUE` lines (blank lines and `#` comments skipped), or a YAML/JSON mapping of
/// strings. The file is the user's own, so it is read as any YAML first.
pub fn secret_values(text: &str) -> anyhow::Result<BTreeMap<String, String>> {
    if let Ok(Value::Object(map)) = serde_yaml::from_str::<Value>(text) {
        return map
            .into_iter()
            .map(|(key, value)| match value {
                Value::String(s) => Ok((key, s)),
                Value::Number(n) => Ok((key, n.to_string())),
                Value::Bool(b) => Ok((key, b.to_string())),
                _ => anyhow::bail!("the value of {key:?} is not a string"),
            })
            .collect();
    }
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (key, value) = line
                .split_once('=')
                .with_context(|| format!("{line:?} is not KEY=VALUE"))?;
            Ok((key.trim().to_owned(), value.to_owned()))
        })
        .collect()
}

fn read_text(file: &Path) -> anyhow::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))
}

pub async fn secret(global: &Global, command: SecretCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        SecretCommand::Set { target, file } => {
            let values = secret_values(&read_text(&file)?)?;
            let path = path(global, &mut client, &target, "secret").await?;
            let answer: SecretResponse = client.put_as(&path, &SecretBody { values }).await?;
            global.done(
                &answer,
                &format!(
                    "secret of {}/{} has keys {}",
                    target.app.app,
                    target.component,
                    crate::cmd::json_of(&answer.keys)
                ),
            );
        }
        SecretCommand::Delete { target, keys } => {
            let mut path = path(global, &mut client, &target, "secret").await?;
            if !keys.is_empty() {
                path.push_str(&format!("?keys={}", api::query_value(&keys.join(","))));
            }
            let answer: SecretResponse = client.delete_as(&path).await?;
            global.done(
                &answer,
                &format!("secret of {}/{} removed", target.app.app, target.component),
            );
        }
    }
    Ok(())
}

pub async fn git_credentials(
    global: &Global,
    command: GitCredentialsCommand,
) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        GitCredentialsCommand::Set {
            target,
            username,
            password_stdin,
            ssh_key_file,
            known_hosts_file,
        } => {
            let body = match (username, ssh_key_file, known_hosts_file) {
                (Some(username), None, None) => GitCredentialsBody {
                    username: Some(username),
                    password: Some(secret_input(
                        password_stdin,
                        "KUBENEST_GIT_PASSWORD",
                        "the password or token",
                    )?),
                    ssh_private_key: None,
                    known_hosts: None,
                },
                (None, Some(key), Some(known_hosts)) => GitCredentialsBody {
                    username: None,
                    password: None,
                    ssh_private_key: Some(read_text(&key)?),
                    known_hosts: Some(read_text(&known_hosts)?),
                },
                _ => anyhow::bail!(
                    "give --username with --password-stdin (https), or --ssh-key-file with \
                     --known-hosts-file (ssh)"
                ),
            };
            let path = path(global, &mut client, &target, "git-credentials").await?;
            let answer: GitCredentialsResponse = client.put_as(&path, &body).await?;
            global.done(
                &answer,
                &format!(
                    "Git credentials of {}/{} set ({})",
                    target.app.app,
                    target.component,
                    crate::cmd::json_of(&answer.kind)
                ),
            );
        }
        GitCredentialsCommand::Delete { target } => {
            let path = path(global, &mut client, &target, "git-credentials").await?;
            let answer: GitCredentialsResponse = client.delete_as(&path).await?;
            global.done(
                &answer,
                &format!(
                    "Git credentials of {}/{} removed",
                    target.app.app, target.component
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_from_an_env_file_or_a_mapping() {
        let env = secret_values("# db\nPASSWORD=s3=cr3t\n\nUSER = app\n").unwrap();
        assert_eq!(env["PASSWORD"], "s3=cr3t");
        assert_eq!(env["USER"], " app");
        let yaml = secret_values("PASSWORD: hunter2\nPORT: 5432\n").unwrap();
        assert_eq!(yaml["PORT"], "5432");
        assert!(secret_values("NESTED:\n  a: b\n").is_err());
        assert!(secret_values("no equals sign").is_err());
    }
}
