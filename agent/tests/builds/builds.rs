//! Builds from Git on a real node: a Git workload's revision is checked out from a private
//! HTTPS Git server (and over ssh with a key, as `ssh://` and as `git@host:path`), built by a Job of the builder image (images/builder: Git and buildah),
//! pushed to a registry that wants an account (the distribution registry over TLS), and the
//! App then runs that image, pulled by the node with the project's registry credentials (a
//! `kubernetes.io/dockerconfigjson` Secret set with `secret.set`). A revision whose Dockerfile
//! fails fails the App with the builder's last lines.
//!
//! Needs root (the real node); the images come from tools/build-images.sh and
//! tools/build-testbox.sh (built or found cached).

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{app_ref, project_with_registry, secret_set};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kubenest_contracts::{self as wire, AppPhase};
use kubenest_testkit::{GitServer, Registry, ServerCa};
use serde_json::json;

/// Pulling the base, building, pushing and pulling again on a real node.
const BUILD: Duration = Duration::from_secs(300);

/// The test kit's busybox image, the base the repository's Dockerfile builds on.
fn testbox_archive() -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/build-testbox.sh");
    let out = std::process::Command::new(script).output().unwrap();
    assert!(
        out.status.success(),
        "build-testbox.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn git_app(app: wire::AppRef, revision: &str, repository: &str) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app, "revision": revision, "progress_deadline_seconds": 300,
        "components": [{"kind": "workload", "name": "web", "replicas": 1, "port": 8080,
            "source": {"type": "git", "repository": repository, "git_ref": "main",
                       "context_dir": "site", "mode": "dockerfile"}}]
    }))
    .unwrap()
}

/// What the web component says on the App's latest status.
fn web_message(status: &wire::AppStatus) -> String {
    status
        .components
        .iter()
        .find(|c| c.name.as_str() == "web")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[test]
fn a_git_workload_is_built_pushed_to_a_private_registry_and_run_and_a_failed_build_says_why() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (env, _) = common::real_node_with(&["builder"]).await;
        let (mgmt, edge) = (env.management().unwrap(), env.cluster("edge").unwrap());
        // The registry and the Git server listen where pods reach the host, over TLS of one CA.
        let host = edge.pod_reachable_host().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = ServerCa::generate(dir.path()).unwrap();
        let registry = Registry::start(host, &ca).await.unwrap();
        edge.trust_registry(registry.address(), &ca.path).unwrap();
        let base = registry
            .push_archive(&testbox_archive(), "base/testbox:1.1")
            .unwrap();
        let git_password = uuid::Uuid::new_v4().simple().to_string();
        let git = GitServer::start_secured(host, &ca, "builder", &git_password)
            .await
            .unwrap();
        let dockerfile = format!(
            "FROM {base}\nUSER 0:0\nCOPY index.html /www/index.html\n\
             RUN echo \"built by kubenest\" >> /www/index.html\nUSER 65534:65534\n\
             CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n"
        );
        let first = git
            .commit(
                "shop",
                &[
                    ("site/Dockerfile", Some(&dockerfile)),
                    ("site/index.html", Some("hello from the shop\n")),
                ],
                "the shop's site",
            )
            .unwrap();

        let shutdown = tokio_util::sync::CancellationToken::new();
        let backend = common::agent_on(mgmt, edge, &shutdown, |config| {
            config.builders = kubenest_agent::context::Builders {
                image: common::BUILDER.into(),
                push_prefix: format!("{}/builds", registry.address()),
                ca: Some(ca.pem.clone()),
            };
        })
        .await;

        let (project_id, namespace) = project_with_registry(&backend, "build").await;
        let client = edge.client().await.unwrap();
        // The project's registry credentials, as the kubelet reads them.
        backend
            .accept(secret_set(
                &namespace,
                wire::REGISTRY_SECRET,
                None,
                wire::SecretKind::DockerConfigJson,
                &[(".dockerconfigjson", &registry.docker_config_json())],
            ))
            .await;
        let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
            .get(wire::REGISTRY_SECRET)
            .await
            .unwrap();
        assert_eq!(
            secret.type_.as_deref(),
            Some("kubernetes.io/dockerconfigjson")
        );
        // Something else under that key is refused, naming the field.
        let refused = backend
            .answer(
                backend
                    .send(secret_set(
                        &namespace,
                        wire::REGISTRY_SECRET,
                        None,
                        wire::SecretKind::DockerConfigJson,
                        &[(".dockerconfigjson", "{\"not\": \"auths\"}")],
                    ))
                    .await,
            )
            .await
            .unwrap_err();
        assert_eq!(refused.field.as_deref(), Some("/values/.dockerconfigjson"));

        let app_id = uuid::Uuid::new_v4().to_string();
        let app = app_ref(&app_id, "shop", &project_id, &namespace);
        // Deployed before its repository's account is given: the checkout is refused, and
        // the build fails saying so.
        let revision = &first[..16];
        backend
            .accept(git_app(app.clone(), revision, &git.url("shop")))
            .await;
        let refused = backend
            .app_status(
                "the build without credentials Failed",
                BUILD,
                &app_id,
                |s| s.observed_revision == revision && s.phase == AppPhase::Failed,
            )
            .await;
        assert!(
            web_message(&refused).contains("could not read Username"),
            "{refused:#?}"
        );
        // The account, in the component's Git Secret (the build pod's only): setting it runs
        // the failed build again.
        backend
            .accept(secret_set(
                &namespace,
                wire::git_secret("shop", "web").as_str(),
                Some(&app_id),
                wire::SecretKind::Opaque,
                &[("username", "builder"), ("password", &git_password)],
            ))
            .await;
        // A report newer than the refusal: until the agent reports again, the refusal is the
        // latest (a report of the build under way is held back a moment for a newer one).
        let running = backend
            .app_status("the built App Running", BUILD, &app_id, |s| {
                s.sequence > refused.sequence
                    && s.observed_revision == revision
                    && matches!(s.phase, AppPhase::Running | AppPhase::Failed)
            })
            .await;
        assert_eq!(running.phase, AppPhase::Running, "{running:#?}");
        assert!(running.components[0].ready, "{running:?}");

        // The pod runs the image the build pushed, pulled from the registry with the
        // project's credentials, and serves what the Dockerfile made.
        let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
        let serving = pods
            .list(
                &ListParams::default()
                    .labels(&format!("{}=web", kubenest_crds::names::labels::COMPONENT)),
            )
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .expect("a running web pod");
        let spec = serving.spec.clone().unwrap();
        let image = &spec.containers[0].image.clone().unwrap();
        assert!(
            image.starts_with(&format!("{}/builds/{namespace}/", registry.address())),
            "image {image}"
        );
        assert!(
            image.ends_with(&format!(":{}", &revision[..12])),
            "image {image}"
        );
        let ip = serving.status.unwrap().pod_ip.unwrap();
        let page = reqwest::get(format!("http://{ip}:8080/index.html"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(page, "hello from the shop\nbuilt by kubenest\n");
        // The build's own log is the component's: the builder said what it did.
        let build_pod = pods
            .list(&ListParams::default().labels(&format!(
                "{}={app_id}",
                kubenest_crds::names::labels::BUILD_OF
            )))
            .await
            .unwrap()
            .items;
        let log = pods
            .logs(
                &build_pod[0].metadata.name.clone().unwrap(),
                &Default::default(),
            )
            .await
            .unwrap();
        assert!(log.contains(&format!("at commit {first}")), "{log}");
        assert!(log.contains("pushed "), "{log}");

        // The same repository over ssh, as an `ssh://` URL on its own port and as Git's scp-like
        // `git@host:shop.git` (port 22, user git): a key and the server's known host in each
        // App's Git Secret; the builder hands either form to Git unchanged.
        let over_url = git.serve_ssh(host).await.unwrap();
        let scp_like = git.serve_scp_like(host).await.unwrap();
        for (name, ssh) in [("shop-ssh", &over_url), ("shop-scp", &scp_like)] {
            let ssh_id = uuid::Uuid::new_v4().to_string();
            backend
                .accept(secret_set(
                    &namespace,
                    wire::git_secret(name, "web").as_str(),
                    Some(&ssh_id),
                    wire::SecretKind::Opaque,
                    &[
                        ("ssh-privatekey", &ssh.private_key),
                        ("known_hosts", &ssh.known_hosts),
                    ],
                ))
                .await;
            backend
                .accept(git_app(
                    app_ref(&ssh_id, name, &project_id, &namespace),
                    revision,
                    &ssh.url("shop"),
                ))
                .await;
            let over_ssh = backend
                .app_status("the App built over ssh Running", BUILD, &ssh_id, |s| {
                    matches!(s.phase, AppPhase::Running | AppPhase::Failed)
                })
                .await;
            assert_eq!(
                over_ssh.phase,
                AppPhase::Running,
                "{} {over_ssh:#?}",
                ssh.url("shop")
            );
        }

        // A revision that does not build fails the App with the builder's last lines.
        let broken = git
            .commit(
                "shop",
                &[(
                    "site/Dockerfile",
                    Some(&format!(
                        "FROM {base}\nRUN echo \"compiling the shop\" && exit 3\n"
                    )),
                )],
                "a step that fails",
            )
            .unwrap();
        let revision = &broken[..16];
        backend
            .accept(git_app(app.clone(), revision, &git.url("shop")))
            .await;
        let failed = backend
            .app_status("the broken build Failed", BUILD, &app_id, |s| {
                s.observed_revision == revision && s.phase == AppPhase::Failed
            })
            .await;
        let message = web_message(&failed);
        assert!(message.contains("compiling the shop"), "{message}");
        assert!(message.contains("exit status 3"), "{message}");
        let statuses: BTreeMap<String, wire::BuildPhase> = backend
            .events()
            .into_iter()
            .filter_map(|m| match m {
                wire::Message::BuildStatus(b) => Some((b.build_id.to_string(), b.phase)),
                _ => None,
            })
            .collect();
        assert!(
            statuses.values().any(|p| *p == wire::BuildPhase::Succeeded)
                && statuses.values().any(|p| *p == wire::BuildPhase::Failed),
            "{statuses:?}"
        );
        shutdown.cancel();
    });
}
