//! The kubenest processes of a local installation, on top of a test-kit [`Environment`]: hub
//! replicas, leader-elected controllers, the API server, and one agent per workload cluster,
//! registered through the API like any user's cluster. `kubenest-dev up` runs one; the
//! end-to-end tests run one each and kill, restart and cut parts of it.
//!
//! Every part is the real release binary in its own process group with its log under the run
//! directory. Agents reach the hub through a [`TcpProxy`] of their own (round-robin over the hub
//! replicas, as a load balancer would), so a test can cut or stall one agent's link; the
//! public hub address in `dev.env` is another such proxy.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::Api;
use kubenest_testkit::{Environment, TcpProxy};
use serde_json::json;

use kubenest_cli::api;

mod agents;
mod catalog;
mod credentials;
mod options;
mod service;

pub use agents::AgentHandle;
use catalog::{apply_namespace, install_catalog};
pub use credentials::{API_USER, CONTROLLERS_USER};
use credentials::{Keys, api_certificate, certificate, identity_kubeconfig};
pub use options::{Options, random_password};
pub use service::{Programs, Service, repository_root};

/// Namespace of the kubenest system objects on the management cluster and of the agents'.
pub const SYSTEM_NAMESPACE: &str = "kubenest-system";

#[derive(Debug)]
pub struct HubReplica {
    pub service: Service,
    pub address: SocketAddr,
    pub admin: SocketAddr,
}

impl HubReplica {
    pub fn url(&self) -> String {
        format!("ws://{}/v1/connect", self.address)
    }
}

/// A running kubenest.
#[derive(Debug)]
pub struct System {
    dir: PathBuf,
    programs: Programs,
    options: Options,
    mgmt_kubeconfig: PathBuf,
    database_url: String,
    signing_key: PathBuf,
    pub hubs: Vec<HubReplica>,
    pub controllers: Vec<Service>,
    pub apiserver: Service,
    api_address: SocketAddr,
    /// The API's self-signed certificate, when it serves HTTPS.
    api_ca: Option<PathBuf>,
    /// The hub address agents are told to dial (`KUBENEST_HUB`).
    public_hub: TcpProxy,
    pub agents: BTreeMap<String, AgentHandle>,
    /// Settings of one cluster's agent beyond the common ones (`make dev`'s builds on `edge`).
    agent_args: BTreeMap<String, Vec<String>>,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

impl System {
    /// Starts hubs, controllers and the API server against the environment's management
    /// cluster and `database_url`, and waits until the API answers and the bootstrap admin can
    /// log in. Logs and keys go to `dir`.
    pub async fn start(
        env: &Environment,
        database_url: &str,
        dir: &Path,
        options: Options,
        progress: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<Self> {
        let programs = Programs::locate()?;
        let mgmt = env
            .management()
            .context("the environment has no management cluster")?;
        std::fs::create_dir_all(dir)?;
        let dir = std::path::absolute(dir)?;
        let client = mgmt.client().await?;
        apply_namespace(&client, SYSTEM_NAMESPACE).await?;

        let Keys {
            signing: signing_key,
            public: public_key,
            api: api_key,
        } = Keys::generate(&dir)?;

        let mgmt_kubeconfig = std::path::absolute(mgmt.kubeconfig_path())?;
        let mut hubs = Vec::new();
        for i in 0..options.hubs {
            let address = loopback(kubenest_testkit::free_port()?);
            let admin = loopback(kubenest_testkit::free_port()?);
            let name = format!("hub-{i}");
            let service = Service::new(&name, &programs.hub, &dir)
                .traced(options.traces_endpoint.as_deref())
                .arg(format!("--listen={address}"))
                .admin(admin)
                .arg(format!("--jwt-public-key={}", public_key.display()))
                .arg("--insecure-plaintext")
                .arg(format!("--replica={name}"))
                .arg(format!("--advertise=ws://{address}"))
                .arg(format!("--kubeconfig={}", mgmt_kubeconfig.display()))
                .arg(format!("--lease-namespace={SYSTEM_NAMESPACE}"));
            hubs.push(HubReplica {
                service,
                address,
                admin,
            });
        }
        let hub_urls: Vec<String> = hubs.iter().map(HubReplica::url).collect();
        let public_host = options
            .public_hub_host
            .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
        let public_hub = TcpProxy::start(
            &std::net::SocketAddr::new(public_host, 0).to_string(),
            hubs.iter().map(|h| h.address).collect(),
        )
        .await?;
        for hub in &mut hubs {
            hub.service.start()?;
        }
        progress(&format!(
            "{} hub replica(s) started: {}",
            hubs.len(),
            hub_urls.join(", ")
        ));

        // The API server and the controllers act as the service accounts the chart gives them
        // (impersonated by the admin), so the admission webhooks tell their writes from a
        // person's kubectl, the admin's included.
        let controllers_kubeconfig =
            identity_kubeconfig(&mgmt_kubeconfig, &dir, "controllers", CONTROLLERS_USER)?;
        let api_kubeconfig = identity_kubeconfig(&mgmt_kubeconfig, &dir, "apiserver", API_USER)?;
        let mut controllers = Vec::new();
        for i in 0..options.controllers {
            let name = format!("controllers-{i}");
            let mut service = Service::new(&name, &programs.controllers, &dir)
                .traced(options.traces_endpoint.as_deref())
                .admin(loopback(kubenest_testkit::free_port()?))
                .arg(format!("--kubeconfig={}", controllers_kubeconfig.display()))
                .arg(format!("--hub-url={}", hub_urls.join(",")))
                .arg(format!("--signing-key={}", signing_key.display()))
                .arg(format!("--identity={name}"))
                .arg(format!(
                    "--heartbeat-window-seconds={}",
                    options.heartbeat_window_seconds
                ))
                .arg("--install-crds")
                .env("KUBENEST_DATABASE_URL", database_url);
            service.start()?;
            controllers.push(service);
        }
        progress(&format!(
            "{} controllers replica(s) started (one leads)",
            controllers.len()
        ));
        install_catalog(&client).await?;
        progress("addon catalog installed (postgres, redis, kafka)");

        let api_address = loopback(kubenest_testkit::free_port()?);
        let root = repository_root();
        let admission_address = loopback(kubenest_testkit::free_port()?);
        let (admission_cert, admission_key) =
            certificate(&dir, "admission-tls", admission_address)?;
        // The management kube-apiserver presents the test kit's webhook client certificate;
        // the webhooks refuse every other caller in the TLS handshake.
        let admission_client_ca = dir.join("admission-client-ca.crt");
        std::fs::write(&admission_client_ca, &mgmt.webhook_client().ca_pem)?;
        let mut apiserver = Service::new("apiserver", &programs.apiserver, &dir)
            .traced(options.traces_endpoint.as_deref())
            .admin(loopback(kubenest_testkit::free_port()?))
            .arg(format!("--kubeconfig={}", api_kubeconfig.display()))
            .arg(format!("--listen={api_address}"))
            .arg(format!("--admission-listen={admission_address}"))
            .arg(format!("--admission-tls-cert={}", admission_cert.display()))
            .arg(format!("--admission-tls-key={}", admission_key.display()))
            .arg(format!(
                "--admission-client-ca={}",
                admission_client_ca.display()
            ))
            .arg(format!("--admission-endpoint=https://{admission_address}"))
            .arg(format!("--admission-trusted-user={CONTROLLERS_USER}"))
            .arg(format!("--api-signing-key={}", api_key.display()))
            .arg(format!("--hub-url={}", hub_urls.join(",")))
            .arg(format!("--hub-signing-key={}", signing_key.display()))
            .arg(format!(
                "--public-hub-url=ws://{}/v1/connect",
                public_hub.address()
            ))
            .arg(format!(
                "--reads-per-second={}",
                options.api_reads_per_second
            ))
            .arg(format!(
                "--writes-per-second={}",
                options.api_writes_per_second
            ))
            .env("KUBENEST_DATABASE_URL", database_url)
            .env("KUBENEST_ADMIN_USER", &options.admin_user)
            .env("KUBENEST_ADMIN_PASSWORD", &options.admin_password);
        if let Some(console) = &options.console_dir {
            apiserver = apiserver.arg(format!("--console-dir={}", console.display()));
        }
        apiserver = match &options.agent_chart {
            None => apiserver.arg(format!(
                "--agent-chart={}",
                root.join("charts/kubenest-agent").display()
            )),
            Some((chart, version)) => apiserver
                .arg(format!("--agent-chart={chart}"))
                .arg(format!("--agent-chart-version={version}")),
        };
        let api_ca = if options.api_tls {
            let (cert, key) = api_certificate(&dir, api_address)?;
            apiserver = apiserver
                .arg(format!("--tls-cert={}", cert.display()))
                .arg(format!("--tls-key={}", key.display()))
                .arg("--secure-cookies=true");
            Some(cert)
        } else {
            apiserver = apiserver.arg("--secure-cookies=false");
            None
        };
        apiserver.start()?;

        let mut system = Self {
            dir,
            programs,
            options,
            mgmt_kubeconfig,
            database_url: database_url.to_owned(),
            signing_key,
            hubs,
            controllers,
            apiserver,
            api_address,
            api_ca,
            public_hub,
            agents: BTreeMap::new(),
            agent_args: BTreeMap::new(),
        };
        system.wait_for_api(Duration::from_secs(60)).await?;
        progress(&format!("API server ready: {}", system.api_url()));
        Ok(system)
    }

    pub fn api_url(&self) -> String {
        let scheme = if self.api_ca.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.api_address)
    }

    /// The certificate to trust for an HTTPS API (`--ca-file`), if it serves HTTPS.
    pub fn api_ca(&self) -> Option<&Path> {
        self.api_ca.as_deref()
    }

    /// The web console's address when the API server serves it.
    pub fn console_url(&self) -> Option<String> {
        self.options
            .console_dir
            .as_ref()
            .map(|_| format!("{}/", self.api_url()))
    }

    /// The hub address handed to agents (`ws://.../v1/connect`).
    pub fn public_hub_url(&self) -> String {
        format!("ws://{}/v1/connect", self.public_hub.address())
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    pub fn mgmt_kubeconfig(&self) -> &Path {
        &self.mgmt_kubeconfig
    }

    pub fn signing_key(&self) -> &Path {
        &self.signing_key
    }

    /// A client logged in as the bootstrap admin.
    pub async fn admin(&self) -> anyhow::Result<api::Client> {
        let mut client = api::Client::with_ca(&self.api_url(), self.api_ca())?;
        client
            .login(&self.options.admin_user, &self.options.admin_password)
            .await?;
        Ok(client)
    }

    async fn wait_for_api(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.apiserver.check_running()?;
            let last = match self.admin().await {
                Ok(_) => return Ok(()),
                Err(e) => e.to_string(),
            };
            anyhow::ensure!(
                Instant::now() < deadline,
                "the API server did not let the admin log in within {timeout:?}: {last}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates the organization of [`Options::org`] if it is not there yet.
    pub async fn ensure_org(&self) -> anyhow::Result<()> {
        let mut admin = self.admin().await?;
        let org = &self.options.org;
        match admin
            .post(
                "/api/v1/orgs",
                &json!({"name": org, "display_name": format!("{org} organization")}),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Each program's name and admin endpoint (`http://host:port`): hubs, controllers, the API
    /// server, agents.
    pub fn admin_urls(&self) -> Vec<(String, String)> {
        self.hubs
            .iter()
            .map(|h| &h.service)
            .chain(self.controllers.iter())
            .chain(std::iter::once(&self.apiserver))
            .chain(self.agents.values().map(|a| &a.service))
            .filter_map(|s| Some((s.name().to_owned(), s.admin_url()?)))
            .collect()
    }

    /// Every service, for liveness checks and shutdown.
    fn services(&mut self) -> impl Iterator<Item = &mut Service> {
        self.hubs
            .iter_mut()
            .map(|h| &mut h.service)
            .chain(self.controllers.iter_mut())
            .chain(std::iter::once(&mut self.apiserver))
            .chain(self.agents.values_mut().map(|a| &mut a.service))
    }

    /// `Err` naming the first started program that has exited, with its log's end.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        for service in self.services() {
            service.check_running()?;
        }
        Ok(())
    }

    /// Which controllers replica holds the leader Lease now, if any.
    pub async fn leader(&self, client: &kube::Client) -> anyhow::Result<Option<usize>> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
        let holder = leases
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|l| l.spec.and_then(|s| s.holder_identity))
            .find(|h| h.starts_with("controllers-"));
        Ok(holder.and_then(|h| self.controllers.iter().position(|c| c.name() == h.as_str())))
    }

    /// Stops every program (agents first, so nothing reports into a half-stopped plane).
    pub fn stop(&mut self) {
        for agent in self.agents.values_mut() {
            agent.service.stop();
        }
        self.apiserver.stop();
        for service in &mut self.controllers {
            service.stop();
        }
        for hub in &mut self.hubs {
            hub.service.stop();
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.stop();
    }
}
