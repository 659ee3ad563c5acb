//! Contexts, as kubectl has them: several APIs, users and organizations side by side, one of
//! them current. Each is a login session in `~/.config/kubenest/contexts/NAME.json` (readable by
//! its owner only: it holds a refresh token) with the organization names are looked up in; the
//! current one's name is in `~/.config/kubenest/current-context`.
//!
//! Which session a command uses: `--session FILE` (or `KUBENEST_SESSION`), else `--context NAME`
//! (or `KUBENEST_CONTEXT`), else the current context, else the single session of a login made
//! before contexts (`session.json`).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

use super::{Global, Table, cell, opt};
use crate::api::Session;

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Every context: its API, user and organization; `*` marks the current one.
    List,
    /// Make a context current.
    Use { name: String },
    /// The current context's name.
    Current,
    /// Set the organization the current context looks names up in.
    SetOrg { org: String },
    /// Forget a context (its session is not logged out: `kubenest logout` first for that).
    Delete { name: String },
}

/// A context name: letters, digits and `. _ @ : -`, at most 100, so it is a file name.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let fine = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '-'));
    if !fine {
        anyhow::bail!(
            "context name {name:?}: letters, digits and . _ @ : - only (at most 100, not \
             starting with . or -)"
        );
    }
    Ok(())
}

fn contexts_dir() -> PathBuf {
    Session::config_dir().join("contexts")
}

fn current_file() -> PathBuf {
    Session::config_dir().join("current-context")
}

/// The session file of context `name`.
pub fn path_of(name: &str) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    Ok(contexts_dir().join(format!("{name}.json")))
}

/// The current context's name, if one is set.
pub fn current() -> Option<String> {
    std::fs::read_to_string(current_file())
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| check_name(s).is_ok())
}

pub fn set_current(name: &str) -> anyhow::Result<()> {
    check_name(name)?;
    std::fs::create_dir_all(Session::config_dir())?;
    std::fs::write(current_file(), format!("{name}\n"))
        .with_context(|| format!("write {}", current_file().display()))
}

/// A context's default name: `user@host:port` of the API.
pub fn default_name(api: &str, user: &str) -> String {
    let host = api
        .split_once("://")
        .map_or(api, |(_, rest)| rest)
        .trim_end_matches('/');
    let name: String = format!("{user}@{host}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(100)
        .collect();
    name.trim_start_matches(['.', '-']).to_owned()
}

fn names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(contexts_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_owned)
        })
        .filter(|n| check_name(n).is_ok())
        .collect();
    names.sort();
    names
}

/// A context as `context list` shows it (and `-o json` prints it).
#[derive(Debug, serde::Serialize)]
struct ContextRow {
    current: bool,
    name: String,
    api: String,
    username: String,
    org: Option<String>,
}

impl super::Listed for ContextRow {
    fn name(&self) -> &str {
        &self.name
    }
}

pub fn run(global: &Global, command: ContextCommand) -> anyhow::Result<()> {
    match command {
        ContextCommand::List => {
            let current = current();
            let rows: Vec<ContextRow> = names()
                .into_iter()
                .filter_map(|name| {
                    let session = Session::load(&path_of(&name).ok()?).ok()??;
                    Some(ContextRow {
                        current: current.as_deref() == Some(name.as_str()),
                        name,
                        api: session.api,
                        username: session.username,
                        org: session.org,
                    })
                })
                .collect();
            global.print(&rows, |rows| {
                Table::rows(["CURRENT", "NAME", "API", "USER", "ORG"], rows, |r| {
                    vec![
                        if r.current { "*" } else { "" }.to_owned(),
                        cell(&r.name),
                        cell(&r.api),
                        cell(&r.username),
                        opt(&r.org),
                    ]
                })
            });
        }
        ContextCommand::Use { name } => {
            if !path_of(&name)?.exists() {
                return Err(crate::exit::NotFound(format!(
                    "no context named {name:?}: `kubenest context list` shows them, \
                     `kubenest login --context {name}` makes it"
                ))
                .into());
            }
            set_current(&name)?;
            println!("switched to context {name}");
        }
        ContextCommand::Current => match current() {
            Some(name) => println!("{name}"),
            None => anyhow::bail!("no current context: `kubenest login` makes one"),
        },
        ContextCommand::SetOrg { org } => {
            let name = current().context("no current context: `kubenest login` makes one")?;
            let path = path_of(&name)?;
            let mut session = Session::load(&path)?.context("the current context is gone")?;
            session.org = Some(org.clone());
            session.save(&path)?;
            println!("context {name} looks names up in organization {org}");
        }
        ContextCommand::Delete { name } => {
            let path = path_of(&name)?;
            std::fs::remove_file(&path).with_context(|| format!("no context named {name:?}"))?;
            if current().as_deref() == Some(name.as_str()) {
                let _ = std::fs::remove_file(current_file());
            }
            println!("context {name} deleted");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_names_and_nothing_else() {
        assert!(check_name("admin@127.0.0.1:8080").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "-flag", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            default_name("https://api.example:8443/", "ada"),
            "ada@api.example:8443"
        );
        assert!(check_name(&default_name("http://[::1]:80", "ada")).is_ok());
    }
}
