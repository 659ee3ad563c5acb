//! The build Job of a request and what its pod says when it ends (pure): one pod of the
//! builder image (images/builder) that checks out the revision, builds its Dockerfile with
//! buildah and pushes the image.

use kubenest_contracts as wire;
use kubenest_crds::names::labels;
use serde_json::{Value, json};

use crate::crd::build_request_name;

/// The ConfigMap in an App's namespace that holds the CA its builds trust (beside the public
/// roots) for the Git server and the registry, when the agent was given one.
pub const CA_CONFIG_MAP: &str = "kubenest-build-ca";

/// The CA ConfigMap of an App's namespace (pure).
pub fn ca_config_map(namespace: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CA_CONFIG_MAP, "namespace": namespace,
                     "labels": {labels::MANAGED_BY: labels::MANAGED_BY_AGENT}},
        "data": {"ca.crt": ca},
    })
}

/// The build Job of a request (pure): one pod of the builder image (images/builder) checks out
/// the revision, builds its Dockerfile with buildah and pushes the image. It mounts, each only
/// if it exists, the component's Git credentials ([`wire::git_secret`]), the project's registry
/// credentials (`registry_secret`, the pull Secret of its namespace, to push) and the CA of
/// [`CA_CONFIG_MAP`]. When the
/// build fails, its log's last lines become the container's termination message
/// (`FallbackToLogsOnError`), which [`failure`] reads back.
pub fn job(
    request: &wire::BuildRequest,
    builders: &crate::context::Builders,
    registry_secret: Option<&str>,
) -> Value {
    let name = build_request_name(request.build_id.as_str());
    let source = &request.source;
    let mode = match source.mode {
        wire::BuildMode::Dockerfile => "dockerfile",
        wire::BuildMode::Buildpack => "buildpack",
    };
    let git_secret = wire::git_secret(request.app.name.as_str(), request.component.as_str());
    let mut volumes = vec![
        json!({"name": "workspace", "emptyDir": {}}),
        json!({"name": "storage", "emptyDir": {}}),
        json!({"name": "git", "secret": {"secretName": git_secret.as_str(), "optional": true,
                                         "defaultMode": 0o400}}),
    ];
    let mut mounts = vec![
        json!({"name": "workspace", "mountPath": "/workspace"}),
        json!({"name": "storage", "mountPath": "/var/lib/containers"}),
        json!({"name": "git", "mountPath": "/kubenest/git", "readOnly": true}),
    ];
    if let Some(secret) = registry_secret {
        volumes.push(json!({"name": "registry", "secret": {"secretName": secret,
            "optional": true, "defaultMode": 0o400}}));
        mounts
            .push(json!({"name": "registry", "mountPath": "/kubenest/registry", "readOnly": true}));
    }
    if builders.ca.is_some() {
        volumes.push(json!({"name": "ca", "configMap": {"name": CA_CONFIG_MAP}}));
        mounts.push(json!({"name": "ca", "mountPath": "/kubenest/ca", "readOnly": true}));
    }
    // No securityContext: the build runs in the project namespace under Pod Security's
    // `baseline` (no privilege, no host namespaces or paths, default capabilities only), which
    // buildah's chroot isolation on vfs needs no more than. It runs as root with those default
    // capabilities, so a `restricted` project (non-root, every capability dropped) cannot build.
    let container = json!({
        "name": "build",
        "image": builders.image,
        "env": [
            {"name": "GIT_REPOSITORY", "value": source.repository},
            {"name": "GIT_REF", "value": source.git_ref},
            {"name": "CONTEXT_DIR", "value": source.context_dir.clone().unwrap_or_default()},
            {"name": "BUILD_MODE", "value": mode},
            {"name": "IMAGE", "value": request.image},
        ],
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": request.app.namespace.as_str(),
            "labels": {
                labels::BUILD_OF: request.app.app_id.as_str(),
                labels::BUILD_ID: request.build_id.as_str(),
                labels::MANAGED_BY: labels::MANAGED_BY_AGENT,
            },
        },
        "spec": {
            // A build that failed fails again from the same revision: no retry.
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                // The build's pods are the component's too: its logs stream with the
                // component's (`logs.subscribe`), tagged with the build pod's name.
                "metadata": {"labels": {
                    labels::BUILD_ID: request.build_id.as_str(),
                    labels::BUILD_OF: request.app.app_id.as_str(),
                    labels::COMPONENT: request.component.as_str(),
                }},
                "spec": {
                    "restartPolicy": "Never",
                    // The builder talks to Git and the registry only, never to the cluster.
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// The last lines a failed build pod left as its termination message, if any (pure).
pub fn failure(pod: &Value) -> Option<String> {
    let statuses = pod.pointer("/status/containerStatuses")?.as_array()?;
    statuses.iter().find_map(|s| {
        let message = s.pointer("/state/terminated/message")?.as_str()?.trim();
        (!message.is_empty()).then(|| message.to_owned())
    })
}

/// (phase, message) of a build from its Job (pure).
pub fn progress(job: &Value) -> (&'static str, String) {
    let count = |field: &str| {
        job.pointer(&format!("/status/{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let failed_condition = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.get("type").and_then(Value::as_str) == Some("Failed")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
        .map(|c| {
            c.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the build job failed")
                .to_owned()
        });
    if count("succeeded") > 0 {
        ("Succeeded", String::new())
    } else if let Some(message) = failed_condition {
        ("Failed", message)
    } else if count("active") > 0 {
        ("Running", "the build is running".into())
    } else {
        ("Pending", "waiting for the build pod".into())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    pub(in crate::build) fn request(mode: wire::BuildMode) -> wire::BuildRequest {
        wire::BuildRequest {
            build_id: "shop-web-abc".into(),
            app: wire::AppRef {
                app_id: "a1".into(),
                name: "shop".into(),
                project_id: "p1".into(),
                namespace: "shop".into(),
            },
            component: "web".into(),
            source: wire::GitSource {
                repository: "https://git.example.test/shop.git".into(),
                git_ref: "main".into(),
                context_dir: Some("web".into()),
                mode,
            },
            image: "builds/shop/web:abc".into(),
        }
    }

    fn builders() -> crate::context::Builders {
        crate::context::Builders {
            image: "builder:v1".into(),
            push_prefix: "builds".into(),
            ca: Some("PEM".into()),
        }
    }

    #[test]
    fn a_build_is_one_pod_of_the_builder_with_the_source_and_the_credentials_it_may_use() {
        let job = job(
            &request(wire::BuildMode::Dockerfile),
            &builders(),
            Some("kubenest-registry"),
        );
        assert_eq!(job["metadata"]["namespace"], "shop");
        assert_eq!(job["spec"]["backoffLimit"], 0);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false);
        let container = &pod["containers"][0];
        assert_eq!(container["image"], "builder:v1");
        assert_eq!(
            container["terminationMessagePolicy"],
            "FallbackToLogsOnError"
        );
        let env: BTreeMap<&str, &str> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(env["GIT_REPOSITORY"], "https://git.example.test/shop.git");
        assert_eq!(env["GIT_REF"], "main");
        assert_eq!(env["CONTEXT_DIR"], "web");
        assert_eq!(env["BUILD_MODE"], "dockerfile");
        assert_eq!(env["IMAGE"], "builds/shop/web:abc");
        let volumes: BTreeMap<&str, &Value> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v))
            .collect();
        assert_eq!(volumes["git"]["secret"]["secretName"], "shop-web-git");
        assert_eq!(volumes["git"]["secret"]["optional"], true);
        assert_eq!(
            volumes["registry"]["secret"]["secretName"],
            "kubenest-registry"
        );
        assert_eq!(volumes["ca"]["configMap"]["name"], CA_CONFIG_MAP);
        let no_ca = crate::context::Builders {
            ca: None,
            ..builders()
        };
        let job = super::job(&request(wire::BuildMode::Dockerfile), &no_ca, None);
        let names: Vec<&str> = job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&"ca") && !names.contains(&"registry"));
    }

    #[test]
    fn a_failed_build_pod_gives_back_its_termination_message() {
        let pod = json!({"status": {"containerStatuses": [{"state": {"terminated": {
            "exitCode": 1, "message": "STEP 2/2: RUN false\nError: exit status 1\n"}}}]}});
        assert_eq!(
            failure(&pod).as_deref(),
            Some("STEP 2/2: RUN false\nError: exit status 1")
        );
        assert_eq!(failure(&json!({"status": {}})), None);
    }

    #[test]
    fn job_status_maps_to_build_phases() {
        assert_eq!(progress(&json!({})).0, "Pending");
        assert_eq!(progress(&json!({"status": {"active": 1}})).0, "Running");
        assert_eq!(
            progress(&json!({"status": {"succeeded": 1}})).0,
            "Succeeded"
        );
        let failed = json!({"status": {"failed": 2, "conditions": [
            {"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}});
        assert_eq!(
            progress(&failed),
            ("Failed", "BackoffLimitExceeded".to_owned())
        );
    }
}
