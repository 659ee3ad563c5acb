//! `.kubenest/dev.env`, as the tour reads it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The keys of `.kubenest/dev.env` the tour uses.
#[derive(Debug, Clone)]
pub struct DevEnv {
    pub api: String,
    pub admin_user: String,
    pub admin_password: String,
    pub org: String,
    /// Workload cluster name → (cluster id, kubeconfig).
    pub clusters: BTreeMap<String, (String, PathBuf)>,
}

impl DevEnv {
    /// Reads a `dev.env` file written by `kubenest-dev up`.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "read {} (is `make dev` running in this directory?)",
                path.display()
            )
        })?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let vars: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .collect();
        let get = |key: &str| {
            vars.get(key)
                .map(|v| (*v).to_owned())
                .with_context(|| format!("dev.env has no {key}"))
        };
        let mut clusters = BTreeMap::new();
        for name in get("KUBENEST_CLUSTERS")?
            .split(',')
            .filter(|n| !n.is_empty())
        {
            let key = name.to_uppercase();
            clusters.insert(
                name.to_owned(),
                (
                    get(&format!("KUBENEST_CLUSTER_ID_{key}"))?,
                    PathBuf::from(get(&format!("KUBENEST_KUBECONFIG_{key}"))?),
                ),
            );
        }
        Ok(Self {
            api: get("KUBENEST_API")?,
            admin_user: get("KUBENEST_ADMIN_USER")?,
            admin_password: get("KUBENEST_ADMIN_PASSWORD")?,
            org: get("KUBENEST_ORG")?,
            clusters,
        })
    }
}
