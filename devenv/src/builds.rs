//! Builds from Git in `make dev`: beside the real-node cluster, an image registry (the
//! distribution registry, TLS and one account) that the node pulls from, and a Git server over
//! HTTPS (one account) holding a sample repository whose Dockerfile builds on the demo image.
//! The cluster's agent builds with the builder image and pushes under `<registry>/builds`; the
//! tour builds the sample (step 10) with the project's registry credentials and the App's Git
//! credentials, set through the API. The registry also serves a sample Helm chart ([`HELLO`],
//! OCI, at [`BuildSite::chart_repository`]), which the agent may pull from there
//! (`--chart-sources`) and the tour runs as a chart workload, paused and resumed (step 11).
//! Everything listens on the address pods reach the host on.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use kubenest_testkit::{Environment, GitServer, Images, Registry, ServerCa};

/// The account of the Git server.
const GIT_USER: &str = "kubenest";

/// The version the sample's image reports (its Dockerfile sets `DEMO_VERSION`).
pub const SAMPLE_VERSION: &str = "built-from-git";

/// The sample chart: the demo web app as a Deployment (its image a value) beside a CronJob, so
/// that pausing it has something to scale and something to suspend.
pub const HELLO: [(&str, &str); 3] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
    ),
    (
        "values.yaml",
        "image: localhost/kubenest/demo:0.1.0\nreplicas: 2\n",
    ),
    (
        "templates/all.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ .Release.Name }}"}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: "{{ .Release.Name }}"}}
  template:
    metadata: {labels: {app: "{{ .Release.Name }}"}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: "{{ .Values.image }}"
        imagePullPolicy: IfNotPresent
        ports: [{containerPort: 8080}]
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: "{{ .Release.Name }}-report"}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
          containers:
          - name: report
            image: "{{ .Values.image }}"
            imagePullPolicy: IfNotPresent
            args: ["--help"]
            securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
"#,
    ),
];

/// The registry, the Git server and their CA, for as long as `make dev` runs.
pub struct BuildSite {
    ca: ServerCa,
    registry: Registry,
    git: GitServer,
    git_password: String,
    sample: String,
    /// Where the sample chart is (`oci://<registry>/charts`).
    chart_repository: String,
}

impl std::fmt::Debug for BuildSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildSite")
            .field("registry", &self.registry)
            .field("sample", &self.sample)
            .finish_non_exhaustive()
    }
}

impl BuildSite {
    /// Starts both servers for cluster `name` (which has a real node), loads the builder image
    /// onto its node, puts the demo image into the registry and commits the sample repository.
    pub async fn start(env: &Environment, name: &str, dir: &Path) -> anyhow::Result<Self> {
        let cluster = env
            .cluster(name)
            .context("the real-node cluster is missing")?;
        let host = cluster
            .pod_reachable_host()
            .context("the cluster has no real node")?;
        let images = Images::build(&["builder", "demo"]).await?;
        cluster.import_image(images.archive("builder")?).await?;
        let ca = ServerCa::generate(&std::path::absolute(dir.join("build-ca"))?)?;
        let registry = Registry::start(host, &ca).await?;
        cluster.trust_registry(registry.address(), &ca.path)?;
        let demo = &images.get("demo")?.reference;
        let tag = demo.rsplit('/').next().unwrap_or("demo:latest");
        let base = registry.push_archive(images.archive("demo")?, &format!("kubenest/{tag}"))?;
        let git_password = uuid::Uuid::new_v4().simple().to_string();
        let git = GitServer::start_secured(host, &ca, GIT_USER, &git_password).await?;
        let dockerfile = format!(
            "# The demo web app, as a Git workload builds it.\nFROM {base}\n\
             ENV DEMO_VERSION={SAMPLE_VERSION}\n"
        );
        git.commit(
            "sample",
            &[("Dockerfile", Some(&dockerfile))],
            "a sample to build",
        )?;
        let sample = git.url("sample");
        let package = kubenest_testkit::package_chart("hello", &HELLO, dir)?;
        let chart_repository = registry.push_chart(&package)?;
        Ok(Self {
            ca,
            registry,
            git,
            git_password,
            sample,
            chart_repository,
        })
    }

    /// Where the sample chart [`HELLO`] is.
    pub fn chart_repository(&self) -> &str {
        &self.chart_repository
    }

    /// The agent's settings: the builder image, where it pushes, the CA it trusts.
    pub fn agent_args(&self) -> Vec<String> {
        vec![
            format!(
                "--builder-image=localhost/kubenest/builder:{}",
                env!("CARGO_PKG_VERSION")
            ),
            format!("--build-push-prefix={}/builds", self.registry.address()),
            format!("--private-ca-file={}", self.ca.path.display()),
            // The registry is on the cluster's own network: charts may come from it.
            format!("--chart-sources={}", self.chart_repository),
        ]
    }

    /// The `dev.env` lines of the build site.
    pub fn dev_env(&self, out: &mut String) -> anyhow::Result<()> {
        writeln!(out, "KUBENEST_REGISTRY={}", self.registry.address())?;
        writeln!(
            out,
            "KUBENEST_REGISTRY_USERNAME={}",
            self.registry.username()
        )?;
        writeln!(
            out,
            "KUBENEST_REGISTRY_PASSWORD={}",
            self.registry.password()
        )?;
        writeln!(out, "KUBENEST_BUILD_CA_FILE={}", self.ca.path.display())?;
        writeln!(
            out,
            "KUBENEST_GIT_URL={}",
            self.git.url("").trim_end_matches("/.git")
        )?;
        writeln!(out, "KUBENEST_GIT_USERNAME={GIT_USER}")?;
        writeln!(out, "KUBENEST_GIT_PASSWORD={}", self.git_password)?;
        writeln!(out, "KUBENEST_GIT_SAMPLE={}", self.sample)?;
        writeln!(out, "KUBENEST_CHART_REPOSITORY={}", self.chart_repository)?;
        Ok(())
    }
}
