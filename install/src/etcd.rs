//! The `etcd` stage: etcd on every control plane machine, one cluster of them over TLS (the
//! `pki` stage's etcd certificates, client certificates required on both ports), its data in
//! `/var/lib/etcd`; the stage ends when each member answers `/health` to the API server's
//! etcd client certificate, or fails with `ERR_TIMEOUT` and etcd's own last lines.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::machines::{Machine, MachinesFile, Role};
use crate::pki::ClusterPki;
use crate::services::{self, ETCD};
use crate::ssh::Ssh;
use crate::stage::{FailureCode, Stage, StageFailure};

/// How long a member has to become healthy.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// A URL's host part for `address` (an IPv6 address in brackets).
fn host(address: &str) -> String {
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => address.to_owned(),
    }
}

/// The member script of `machine` in a cluster of `members`. Every value in it was checked by
/// [`crate::machines`] (DNS labels, IP addresses or DNS names): nothing a shell reads specially.
pub fn script(machine: &Machine, members: &[&Machine]) -> String {
    let me = host(&machine.address);
    let initial: Vec<String> = members
        .iter()
        .map(|m| format!("{}=https://{}:2380", m.name, host(&m.address)))
        .collect();
    let pki = "/etc/kubernetes/pki/etcd";
    format!(
        "#!/bin/sh\n# etcd member {name}, written by the install's etcd stage.\n\
         exec /var/lib/kubenest/bundle/bin/etcd \\\n  \
         --name={name} \\\n  --data-dir=/var/lib/etcd \\\n  \
         --listen-client-urls=https://127.0.0.1:2379,https://{me}:2379 \\\n  \
         --advertise-client-urls=https://{me}:2379 \\\n  \
         --listen-peer-urls=https://{me}:2380 \\\n  \
         --initial-advertise-peer-urls=https://{me}:2380 \\\n  \
         --initial-cluster={initial} \\\n  --initial-cluster-state=new \\\n  \
         --initial-cluster-token=kubenest \\\n  \
         --cert-file={pki}/server.crt --key-file={pki}/server.key \\\n  \
         --trusted-ca-file={pki}/ca.crt --client-cert-auth=true \\\n  \
         --peer-cert-file={pki}/peer.crt --peer-key-file={pki}/peer.key \\\n  \
         --peer-trusted-ca-file={pki}/ca.crt --peer-client-cert-auth=true\n",
        name = machine.name,
        initial = initial.join(","),
    )
}

/// Runs the etcd stage: every member started (or left running), then healthy.
pub async fn run(
    pki: &ClusterPki,
    file: &MachinesFile,
    state_dir: &Path,
    known_hosts: &Path,
) -> Result<(), StageFailure> {
    let members: Vec<&Machine> = file.with_role(Role::ControlPlane).collect();
    for machine in &members {
        let ssh = Ssh::to(machine, known_hosts);
        let dir = state_dir.join("services").join(&machine.name);
        services::run(
            Stage::Etcd,
            &ssh,
            &dir,
            ETCD,
            &script(machine, &members),
            &[],
        )
        .await?;
    }
    let client = pki
        .etcd_client()
        .map_err(|e| StageFailure::new(Stage::Etcd, FailureCode::Configuration, e))?;
    for machine in &members {
        let url = format!("https://{}:2379/health", host(&machine.address));
        let started = Instant::now();
        loop {
            let last = match client.get(&url).send().await {
                Ok(answer) => {
                    let text = answer.text().await.unwrap_or_default();
                    if text.contains("\"health\":\"true\"") {
                        break;
                    }
                    text
                }
                Err(e) => e.to_string(),
            };
            if started.elapsed() > DEADLINE {
                let ssh = Ssh::to(machine, known_hosts);
                return Err(StageFailure::new(
                    Stage::Etcd,
                    FailureCode::Timeout,
                    format!(
                        "etcd on {} is not healthy after {}s: {last}",
                        machine.name,
                        DEADLINE.as_secs()
                    ),
                )
                .on(&machine.name)
                .with_log(&services::logs(&ssh, ETCD).await));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::MachinesFile;

    #[test]
    fn each_member_names_the_whole_cluster_and_its_own_addresses() {
        let file = MachinesFile::parse(
            "machines:
  - {name: cp1, address: 10.0.0.11, key_file: /k, roles: [control-plane]}
  - {name: cp2, address: 'fd00::2', key_file: /k, roles: [control-plane]}
",
        )
        .unwrap();
        let members: Vec<&Machine> = file.machines.iter().collect();
        let two = script(&file.machines[1], &members);
        assert!(two.contains("--name=cp2 "), "{two}");
        assert!(
            two.contains("--listen-peer-urls=https://[fd00::2]:2380"),
            "{two}"
        );
        assert!(
            two.contains("--initial-cluster=cp1=https://10.0.0.11:2380,cp2=https://[fd00::2]:2380"),
            "{two}"
        );
    }
}
