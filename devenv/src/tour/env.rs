//! `.kubenest/dev.env`, as the tour reads it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The keys of `.kubenest/dev.env` the tour uses.
#[derive(Debug, Clone)]
pub struct DevEnv {
    pub api: String,
    /// The CA certificate of an https API (`KUBENEST_CA_FILE`, which the CLI reads too).
    pub ca_file: Option<PathBuf>,
    pub admin_user: String,
    pub admin_password: String,
    pub org: String,
    /// Workload cluster name → (cluster id, kubeconfig).
    pub clusters: BTreeMap<String, (String, PathBuf)>,
    /// The cluster with a real node and the demo image loaded on it
    /// (`KUBENEST_REAL_NODE_CLUSTER`, `KUBENEST_DEMO_IMAGE`), where the tour runs the demo App.
    pub real_node: Option<(String, String)>,
    /// `make dev`'s registry and Git server for builds on the real node, where the tour builds
    /// its sample (`KUBENEST_REGISTRY*`, `KUBENEST_GIT_*`).
    pub builds: Option<BuildEnv>,
}

/// Where builds push and what they build, with the accounts of both servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildEnv {
    pub registry: String,
    pub registry_username: String,
    pub registry_password: String,
    pub sample: String,
    pub git_username: String,
    pub git_password: String,
    /// The sample chart's repository (`oci://…`), if `make dev` serves one.
    pub chart_repository: Option<String>,
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
            ca_file: vars.get("KUBENEST_CA_FILE").map(PathBuf::from),
            admin_user: get("KUBENEST_ADMIN_USER")?,
            admin_password: get("KUBENEST_ADMIN_PASSWORD")?,
            org: get("KUBENEST_ORG")?,
            clusters,
            real_node: vars
                .get("KUBENEST_REAL_NODE_CLUSTER")
                .zip(vars.get("KUBENEST_DEMO_IMAGE"))
                .map(|(cluster, image)| ((*cluster).to_owned(), (*image).to_owned())),
            builds: build_env(&get),
        })
    }
}

/// The build site's keys, when `dev.env` has them all.
fn build_env(get: &impl Fn(&str) -> anyhow::Result<String>) -> Option<BuildEnv> {
    Some(BuildEnv {
        registry: get("KUBENEST_REGISTRY").ok()?,
        registry_username: get("KUBENEST_REGISTRY_USERNAME").ok()?,
        registry_password: get("KUBENEST_REGISTRY_PASSWORD").ok()?,
        sample: get("KUBENEST_GIT_SAMPLE").ok()?,
        git_username: get("KUBENEST_GIT_USERNAME").ok()?,
        git_password: get("KUBENEST_GIT_PASSWORD").ok()?,
        chart_repository: get("KUBENEST_CHART_REPOSITORY").ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "KUBENEST_API=https://127.0.0.1:1\nKUBENEST_ADMIN_USER=admin\n\
        KUBENEST_ADMIN_PASSWORD=pw\nKUBENEST_ORG=dev\nKUBENEST_CLUSTERS=east\n\
        KUBENEST_CLUSTER_ID_EAST=c1\nKUBENEST_KUBECONFIG_EAST=/k/east\n";

    #[test]
    fn the_ca_and_the_real_node_are_read_when_dev_env_names_them() {
        let bare = DevEnv::parse(BASE).unwrap();
        assert_eq!((bare.ca_file, bare.real_node), (None, None));
        let full = DevEnv::parse(&format!(
            "{BASE}KUBENEST_CA_FILE=/run/ca.crt\nKUBENEST_REAL_NODE_CLUSTER=edge\n\
             KUBENEST_DEMO_IMAGE=localhost/kubenest/demo:0.1.0\n"
        ))
        .unwrap();
        assert_eq!(full.ca_file, Some(PathBuf::from("/run/ca.crt")));
        assert_eq!(
            full.real_node,
            Some(("edge".into(), "localhost/kubenest/demo:0.1.0".into()))
        );
        // A real node without the demo image is no place for the demo.
        let half = DevEnv::parse(&format!("{BASE}KUBENEST_REAL_NODE_CLUSTER=edge\n")).unwrap();
        assert_eq!(half.real_node, None);
        assert_eq!(full.builds, None);
        let builds = DevEnv::parse(&format!(
            "{BASE}KUBENEST_REGISTRY=10.0.0.1:5000\nKUBENEST_REGISTRY_USERNAME=u\n\
             KUBENEST_REGISTRY_PASSWORD=p\nKUBENEST_GIT_SAMPLE=https://10.0.0.1:1/sample.git\n\
             KUBENEST_GIT_USERNAME=g\nKUBENEST_GIT_PASSWORD=q\n"
        ))
        .unwrap();
        let builds = builds.builds.unwrap();
        assert_eq!(builds.registry, "10.0.0.1:5000");
        assert_eq!(
            builds.chart_repository, None,
            "an older make dev serves no chart"
        );
    }
}
