//! The session `kubenest login` keeps between invocations, in a file only its owner can read.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What `kubenest login` stores: where the API is and the tokens to call it with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Session {
    pub api: String,
    pub username: String,
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The CA certificate (PEM) trusted for `api` besides the public roots (`--ca-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The organization names are looked up in (`kubenest context set-org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org: Option<String>,
}

impl Session {
    /// `$KUBENEST_SESSION`, else `$XDG_CONFIG_HOME/kubenest/session.json`, else
    /// `~/.config/kubenest/session.json` (the file of a login before contexts).
    pub fn default_path() -> PathBuf {
        if let Some(path) = std::env::var_os("KUBENEST_SESSION") {
            return path.into();
        }
        Self::config_dir().join("session.json")
    }

    /// `$XDG_CONFIG_HOME/kubenest`, else `~/.config/kubenest`.
    pub fn config_dir() -> PathBuf {
        std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("kubenest")
    }

    pub fn load(path: &Path) -> anyhow::Result<Option<Self>> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
                anyhow::anyhow!("{} is not a kubenest session: {e}", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::anyhow!("read {}: {e}", path.display())),
        }
    }

    /// Writes the session readable by its owner only: it holds a refresh token.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(self)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}
