//! `kubenest-dev machines up N | list | down`: the `local` provider's machines on this host
//! ([`kubenest_machines`]), made to outlive the command, and the machines file for them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use kubenest_machines::persistent;

/// `kubenest-dev machines …`.
#[derive(Debug, Args)]
pub struct MachinesArgs {
    #[command(subcommand)]
    command: MachinesCommand,
}

#[derive(Debug, Subcommand)]
enum MachinesCommand {
    /// Make N machines (1 to 50) that run until `down`, each reached over SSH as root with a
    /// key made for them, and write the machines file.
    Up {
        /// How many machines: the first is the control plane, the others workers.
        #[arg(value_parser = count)]
        count: u8,
        /// Where the machines file is written (YAML).
        #[arg(long, default_value = ".kubenest/machines.yaml")]
        file: PathBuf,
    },
    /// Say which machines are recorded, whether each runs and whether its sshd answers.
    List,
    /// Remove every machine and everything it made (also after a crash or a reboot).
    Down,
}

/// The count, checked at the door with the machines' own rule.
fn count(text: &str) -> Result<u8, String> {
    let given: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number from 1 to 50"))?;
    kubenest_machines::count(given).map_err(|e| e.to_string())
}

/// Runs one `machines` command, printing what it did on `out`.
pub async fn run(args: MachinesArgs, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    match args.command {
        MachinesCommand::Up { count, file } => {
            let up = persistent::up(count).await?;
            let yaml = up.machines_file().to_yaml()?;
            write_file(&file, &yaml)?;
            for m in &up.machines {
                writeln!(out, "{} {} up", m.name, m.address)?;
            }
            writeln!(
                out,
                "machines file: {}\nssh -i {} root@{}",
                file.display(),
                persistent::key_path().display(),
                up.machines
                    .first()
                    .map(|m| m.address.to_string())
                    .unwrap_or_default()
            )?;
        }
        MachinesCommand::List => {
            let machines = persistent::list()?;
            if machines.is_empty() {
                writeln!(out, "no machines")?;
            }
            for s in machines {
                let state = if s.alive { "running" } else { "dead" };
                let sshd = if s.sshd {
                    "sshd answers"
                } else {
                    "sshd does not answer"
                };
                let m = &s.machine;
                writeln!(
                    out,
                    "{} {} pid {} {state}, {sshd}",
                    m.name, m.address, m.pid
                )?;
            }
        }
        MachinesCommand::Down => {
            let removed = persistent::down().await?;
            writeln!(out, "machines removed: {removed}; nothing of them is left")?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_a_whole_number_from_one_to_fifty() {
        assert_eq!(count("1"), Ok(1));
        assert_eq!(count("50"), Ok(50));
        assert_eq!(
            count("51"),
            Err("count: 51 machines asked for; from 1 to 50".into())
        );
        assert_eq!(
            count("0"),
            Err("count: 0 machines asked for; from 1 to 50".into())
        );
        assert_eq!(
            count("-1"),
            Err("\"-1\" is not a whole number from 1 to 50".into())
        );
        assert!(count("99999999999999999999").is_err());
    }
}
