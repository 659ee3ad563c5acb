//! How commands print: `-o table` (default), `wide`, `json`, `yaml` or `name`, and the
//! confirmations of changes (saying when they were a server dry run).

use clap::ValueEnum;
use kubenest_api::removal::RemovalResponse;
use serde::Serialize;
use serde_json::Value;

use super::{Global, Table, text};

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Table,
    /// The table with more columns (each object's id and creation time).
    Wide,
    /// The API's JSON, for scripts.
    Json,
    /// The API's answer as YAML.
    Yaml,
    /// One name per line (the id of an object without a name), to feed other commands.
    Name,
}

/// `--dry-run`, as kubectl takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Do it.
    None,
    /// Have the API check, authorize and admit the change, and keep nothing.
    Server,
}

impl Global {
    /// Prints `value` as JSON, YAML or names, or as the table `table` makes of it.
    pub fn print<T: Serialize>(&self, value: &T, table: impl FnOnce(&T) -> Table) {
        match self.output {
            Output::Table => emit(&table(value).to_string()),
            Output::Wide => emit(&table(value).wide().to_string()),
            _ => self.machine(value),
        }
    }

    /// Prints a one-line confirmation for people (saying when it was a dry run), or the
    /// answer for scripts.
    pub fn done<T: Serialize>(&self, value: &T, message: &str) {
        match self.output {
            Output::Table | Output::Wide if self.dry_run == DryRun::Server => {
                emit(&format!("{message} (server dry run)\n"));
            }
            Output::Table | Output::Wide => emit(&format!("{message}\n")),
            _ => self.machine(value),
        }
    }

    /// `-o json`, `yaml` or `name`: the typed answer written back as the API's JSON.
    fn machine<T: Serialize>(&self, value: &T) {
        let value = &serde_json::to_value(value).unwrap_or_default();
        match self.output {
            Output::Yaml => emit(&serde_yaml::to_string(value).unwrap_or_default()),
            Output::Name => emit(&names(value)),
            _ => emit(&json_text(value)),
        }
    }
}

/// `-o name`: each object's name (or id), one per line; a page's `items` too. It reads the
/// answer written back as JSON, since it is the same for every kind of object.
fn names(value: &Value) -> String {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::Object(page) => match page.get("items") {
            Some(Value::Array(items)) => items.as_slice(),
            _ => std::slice::from_ref(value),
        },
        one => std::slice::from_ref(one),
    };
    items
        .iter()
        .filter_map(|item| {
            ["name", "username", "id"]
                .iter()
                .find_map(|key| item.get(*key).filter(|v| !v.is_null()))
                .map(text)
        })
        .map(|name| format!("{name}\n"))
        .collect()
}

fn json_text(value: &Value) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    )
}

/// `head`, then what a DELETE's answer says: what the deletion waits for, or, after a forced
/// removal, what was removed and what may be left on the cluster.
pub fn removal_message(answer: &RemovalResponse, head: &str) -> String {
    let mut out = format!("{head}\n");
    for (title, items) in [
        ("waiting for", &answer.waiting_for),
        ("removed", &answer.removed),
        ("may be left on the cluster", &answer.left_on_cluster),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("{title}:\n"));
            for item in items {
                out.push_str(&format!("  - {item}\n"));
            }
        }
    }
    out.trim_end().to_owned()
}

/// Writes to standard output; a reader that went away (`| head`) ends the program quietly, as
/// it does for other command-line tools.
pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}
