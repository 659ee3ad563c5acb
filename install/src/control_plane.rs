//! The `control-plane` stage: the API server, the controller manager and the scheduler on
//! every control plane machine, as services started from scripts this stage writes (every
//! value in them checked by the machines file's rules), with kubeadm's flags and the `pki`
//! stage's files. The controller manager and the scheduler reach their machine's API server
//! through kubeconfigs holding their own certificates (mode 0600). The stage ends when every
//! API server answers `/readyz` and both the controller manager and the scheduler hold their
//! leader leases; otherwise `ERR_TIMEOUT` with the lagging program's own last lines.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::machines::{Machine, MachinesFile, Role};
use crate::pki::ClusterPki;
use crate::services::{
    self, Extra, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, Service,
};
use crate::ssh::Ssh;
use crate::stage::{FailureCode, Stage, StageFailure};

/// How long the control plane has to become ready.
pub const DEADLINE: Duration = Duration::from_secs(180);
/// The Services' addresses (the `kubernetes` Service is the first, [`crate::pki::SERVICE_IP`]).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The pods' addresses; the controller manager gives each node a /24 of it.
pub const POD_CIDR: &str = "10.244.0.0/16";

const BIN: &str = "/var/lib/kubenest/bundle/bin";
const PKI: &str = "/etc/kubernetes/pki";

fn host(address: &str) -> String {
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => address.to_owned(),
    }
}

/// The API server of `machine`, its etcd every control plane member.
pub fn apiserver_script(machine: &Machine, members: &[&Machine]) -> String {
    let etcd: Vec<String> = members
        .iter()
        .map(|m| format!("https://{}:2379", host(&m.address)))
        .collect();
    format!(
        "#!/bin/sh\nexec {BIN}/kube-apiserver \\\n  \
         --advertise-address={address} --bind-address=0.0.0.0 --secure-port=6443 \\\n  \
         --etcd-servers={etcd} \\\n  --etcd-cafile={PKI}/etcd/ca.crt \\\n  \
         --etcd-certfile={PKI}/apiserver-etcd-client.crt \\\n  \
         --etcd-keyfile={PKI}/apiserver-etcd-client.key \\\n  \
         --client-ca-file={PKI}/ca.crt \\\n  \
         --tls-cert-file={PKI}/apiserver.crt --tls-private-key-file={PKI}/apiserver.key \\\n  \
         --kubelet-client-certificate={PKI}/apiserver-kubelet-client.crt \\\n  \
         --kubelet-client-key={PKI}/apiserver-kubelet-client.key \\\n  \
         --kubelet-preferred-address-types=InternalIP,Hostname \\\n  \
         --proxy-client-cert-file={PKI}/front-proxy-client.crt \\\n  \
         --proxy-client-key-file={PKI}/front-proxy-client.key \\\n  \
         --requestheader-client-ca-file={PKI}/front-proxy-ca.crt \\\n  \
         --requestheader-allowed-names=front-proxy-client \\\n  \
         --requestheader-extra-headers-prefix=X-Remote-Extra- \\\n  \
         --requestheader-group-headers=X-Remote-Group \\\n  \
         --requestheader-username-headers=X-Remote-User \\\n  \
         --service-account-issuer=https://kubernetes.default.svc.cluster.local \\\n  \
         --service-account-key-file={PKI}/sa.pub \\\n  \
         --service-account-signing-key-file={PKI}/sa.key \\\n  \
         --service-cluster-ip-range={SERVICE_CIDR} \\\n  \
         --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \\\n  \
         --enable-bootstrap-token-auth=true --allow-privileged=true\n",
        address = machine.address,
        etcd = etcd.join(","),
    )
}

/// The controller manager: it signs nodes' certificates with the cluster CA and hands each
/// node its pod range.
pub fn controller_manager_script() -> String {
    let conf = "/etc/kubenest/conf/controller-manager.conf";
    format!(
        "#!/bin/sh\nexec {BIN}/kube-controller-manager \\\n  \
         --kubeconfig={conf} --authentication-kubeconfig={conf} \\\n  \
         --authorization-kubeconfig={conf} --bind-address=127.0.0.1 --leader-elect=true \\\n  \
         --client-ca-file={PKI}/ca.crt --root-ca-file={PKI}/ca.crt \\\n  \
         --cluster-signing-cert-file={PKI}/ca.crt --cluster-signing-key-file={PKI}/ca.key \\\n  \
         --requestheader-client-ca-file={PKI}/front-proxy-ca.crt \\\n  \
         --service-account-private-key-file={PKI}/sa.key \\\n  \
         --use-service-account-credentials=true \\\n  \
         --controllers=*,bootstrapsigner,tokencleaner \\\n  \
         --allocate-node-cidrs=true --cluster-cidr={POD_CIDR} \\\n  \
         --service-cluster-ip-range={SERVICE_CIDR}\n"
    )
}

/// The scheduler.
pub fn scheduler_script() -> String {
    let conf = "/etc/kubenest/conf/scheduler.conf";
    format!(
        "#!/bin/sh\nexec {BIN}/kube-scheduler \\\n  \
         --kubeconfig={conf} --authentication-kubeconfig={conf} \\\n  \
         --authorization-kubeconfig={conf} --bind-address=127.0.0.1 --leader-elect=true\n"
    )
}

/// Asks `url` with the admin's client until `ready` says yes, or the deadline.
async fn until(
    client: &reqwest::Client,
    url: &str,
    started: Instant,
    ready: impl Fn(reqwest::StatusCode, &str) -> bool,
) -> Result<(), String> {
    loop {
        let last = match client.get(url).send().await {
            Ok(answer) => {
                let status = answer.status();
                let text = answer.text().await.unwrap_or_default();
                if ready(status, &text) {
                    return Ok(());
                }
                format!("{status}: {}", text.chars().take(200).collect::<String>())
            }
            Err(e) => e.to_string(),
        };
        if started.elapsed() > DEADLINE {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn timed_out(
    machine: &Machine,
    known_hosts: &Path,
    service: Service,
    what: &str,
    last: String,
) -> StageFailure {
    let ssh = Ssh::to(machine, known_hosts);
    StageFailure::new(
        Stage::ControlPlane,
        FailureCode::Timeout,
        format!(
            "{what} on {} after {}s: {last}",
            machine.name,
            DEADLINE.as_secs()
        ),
    )
    .on(&machine.name)
    .with_log(&services::logs(&ssh, service).await)
}

/// Runs the control-plane stage.
pub async fn run(
    pki: &ClusterPki,
    file: &MachinesFile,
    state_dir: &Path,
    known_hosts: &Path,
) -> Result<(), StageFailure> {
    let members: Vec<&Machine> = file.with_role(Role::ControlPlane).collect();
    let local = "https://127.0.0.1:6443";
    let conf = |stem: &str| -> Result<Extra, StageFailure> {
        Ok(Extra {
            path: format!("conf/{stem}.conf"),
            text: pki.kubeconfig(stem, local)?,
            secret: true,
        })
    };
    for machine in &members {
        let ssh = Ssh::to(machine, known_hosts);
        let dir = state_dir.join("services").join(&machine.name);
        let stage = Stage::ControlPlane;
        services::run(
            stage,
            &ssh,
            &dir,
            KUBE_APISERVER,
            &apiserver_script(machine, &members),
            &[],
        )
        .await?;
        services::run(
            stage,
            &ssh,
            &dir,
            KUBE_CONTROLLER_MANAGER,
            &controller_manager_script(),
            &[conf("controller-manager")?],
        )
        .await?;
        services::run(
            stage,
            &ssh,
            &dir,
            KUBE_SCHEDULER,
            &scheduler_script(),
            &[conf("scheduler")?],
        )
        .await?;
    }
    let client = pki
        .admin_client()
        .map_err(|e| StageFailure::new(Stage::ControlPlane, FailureCode::Configuration, e))?;
    let started = Instant::now();
    for machine in &members {
        let base = format!("https://{}:6443", host(&machine.address));
        if let Err(last) = until(&client, &format!("{base}/readyz"), started, |s, t| {
            s.is_success() && t.trim() == "ok"
        })
        .await
        {
            return Err(timed_out(
                machine,
                known_hosts,
                KUBE_APISERVER,
                "the API server is not ready",
                last,
            )
            .await);
        }
    }
    // One of each leads, on whichever machine: asked of the first API server.
    let first = members.first().ok_or_else(|| {
        StageFailure::new(
            Stage::ControlPlane,
            FailureCode::Configuration,
            "no control plane machine",
        )
    })?;
    let leases = format!(
        "https://{}:6443/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        host(&first.address)
    );
    for (service, lease) in [
        (KUBE_CONTROLLER_MANAGER, "kube-controller-manager"),
        (KUBE_SCHEDULER, "kube-scheduler"),
    ] {
        if let Err(last) = until(&client, &format!("{leases}/{lease}"), started, |s, t| {
            s.is_success() && t.contains("holderIdentity")
        })
        .await
        {
            return Err(timed_out(
                first,
                known_hosts,
                service,
                &format!("{lease} holds no lease"),
                last,
            )
            .await);
        }
    }
    Ok(())
}
