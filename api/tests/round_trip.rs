//! A sample answer of each area, written as the API sends it, is read into its type and
//! written back unchanged: a field renamed, dropped or retyped on one side fails here (the
//! CLI reads these types, the console reads the OpenAPI document made from them).

#![allow(clippy::panic)] // a test fails by panicking

use kubenest_api::Problem;
use kubenest_api::addons::InstanceResponse;
use kubenest_api::alerts::AlertResponse;
use kubenest_api::apps::{AppList, AppObjects, DeploymentView, SecretResponse};
use kubenest_api::audit::AuditPage;
use kubenest_api::clusters::RegistrationResponse;
use kubenest_api::fences::OrgUsageResponse;
use kubenest_api::ingress_ca::IngressCaResponse;
use kubenest_api::orgs::OrgResponse;
use kubenest_api::projects::ProjectResponse;
use kubenest_api::registry::RegistryCredentialsResponse;
use kubenest_api::removal::RemovalResponse;
use kubenest_api::templates::TemplateResponse;
use kubenest_api::users::{TokenResponse, UserView};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Reads `sample` as a `T` and writes it back, which must give `sample` again.
fn round_trips<T: DeserializeOwned + Serialize>(sample: Value) {
    let name = std::any::type_name::<T>();
    let typed: T = match serde_json::from_value(sample.clone()) {
        Ok(typed) => typed,
        Err(e) => panic!("{name} does not read its sample: {e}"),
    };
    let written = serde_json::to_value(&typed).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(written, sample, "{name} does not write its sample back");
}

fn member() -> Value {
    json!({"user": "ada", "user_id": "0b6c1b9e-1f0e-4bb0-9d1a-0c3b2f7e1a11", "role": "admin"})
}

fn sync() -> Value {
    json!({"drift_detected": true, "drift_class": "recoverable", "drift_details": [
        {"resource": "Deployment/web", "field": "spec.replicas", "desired": "2",
         "observed": "3", "manager": "kubectl"}]})
}

fn verdict() -> Value {
    json!({"revision": "r1", "verdict": "Failed", "reason": "restarts 4 > 0",
           "window_seconds": 180, "started_at": "2026-01-01T00:00:00Z",
           "observed_at": "2026-01-01T00:03:00Z", "action": null,
           "signals": [{"name": "restarts", "value": 4.0, "baseline": 0.0, "threshold": 0.0,
                        "failed": true}]})
}

fn amounts() -> Value {
    json!({"cpu": "500m", "memory": "1Gi", "storage": "0", "pods": "3", "load_balancers": "0"})
}

#[test]
fn an_organization_reads_and_writes_back() {
    round_trips::<OrgResponse>(json!({
        "name": "acme", "display_name": "Acme", "namespace": "kubenest-org-acme",
        "phase": "Ready", "role": "admin", "created_at": "2026-01-01T00:00:00Z",
        "verification": {"window_seconds": 180, "on_failure": "rollback", "metrics": {
            "port": 9090, "path": "/metrics", "requests_metric": "http_requests_total",
            "latency_metric": "http_request_duration_seconds"}},
        "budget": {"cpu": "8", "memory": "16Gi"}
    }));
}

#[test]
fn a_cluster_registration_reads_and_writes_back() {
    round_trips::<RegistrationResponse>(json!({
        "cluster_id": "c-1", "connection_token": "t", "token_version": 1,
        "helm_install_command": "helm install ...",
        "cluster": {
            "id": "c-1", "name": "edge", "org": "acme", "display_name": null,
            "state": "Connected", "provider": "byo", "token_version": 1,
            "desired_node_count": null, "cpu_total": 4.0, "cpu_used": 1.5,
            "mem_total": 8_000_000_000u64, "mem_used": 1_000_000u64, "node_count": 1,
            "last_heartbeat": "2026-01-01T00:00:00Z",
            "health": [{"name": "agent", "status": "ok", "message": "",
                        "observed_at": "2026-01-01T00:00:00Z"}],
            "agent_version": "0.1.0", "kubernetes_version": "v1.35.0",
            "created_at": null, "members": [member()]
        }
    }));
}

#[test]
fn a_project_reads_and_writes_back() {
    round_trips::<ProjectResponse>(json!({
        "id": "p-1", "name": "shop", "org": "acme", "cluster": "edge", "cluster_id": "c-1",
        "namespace": "shop", "phase": "Ready", "message": "", "last_observation": null,
        "registry_secret": null, "ingress_ca": false, "members": [member()],
        "created_at": null, "progress_deadline_seconds": 600, "pod_security": "baseline",
        "fences": {"quota": {"cpu": "2", "memory": null, "storage": null, "pods": 10,
                             "load_balancers": null},
                   "defaults": null, "network": {"isolation": "isolated",
                   "allow_from": ["web"], "egress": [{"cidr": "10.0.0.0/8", "ports": [443]}]}},
        "fences_healed": []
    }));
}

#[test]
fn an_app_list_reads_and_writes_back() {
    round_trips::<AppList>(json!({"continue": "acme/abc", "items": [{
        "id": "a-1", "name": "web", "org": "acme", "project": "shop", "project_id": "p-1",
        "cluster_id": "c-1", "phase": "Running", "message": "", "paused": false,
        "progress_deadline_seconds": 600,
        "components": [{"name": "web", "type": "workload", "workload_spec": {"image": "nginx"}}],
        "verification": null, "verdict": verdict(),
        "component_status": [{"name": "web", "ready": true, "ready_replicas": 1,
                              "desired_replicas": 1, "message": ""}],
        "sync": sync(), "revision": "r1", "observed_revision": "r1",
        "deployment_id": "d-1", "ingress_address": null, "gitops_error": null,
        "observed_at": null, "last_observation": null, "created_at": null,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": ""}]
    }]}));
}

#[test]
fn an_apps_history_objects_and_secrets_read_and_write_back() {
    round_trips::<Vec<DeploymentView>>(json!([{
        "id": "d-1", "revision": "r1", "operation": "deploy", "actor": "ada",
        "result": "succeeded", "message": "", "created_at": "2026-01-01T00:00:00Z",
        "finished_at": null, "rollback_of": null, "diff": {"image": ["a", "b"]},
        "verification": verdict(), "reason": ""
    }]));
    round_trips::<AppObjects>(json!({
        "truncated": false, "taken_at": "2026-01-01T00:00:00Z",
        "objects": [{"kind": "Pod", "name": "web-1", "uid": "u", "owners": ["ReplicaSet/web"],
                     "component": "web", "created": "2026-01-01T00:00:00Z",
                     "status": {"health": "ready", "phase": "Running", "ready": 1,
                                "desired": 1, "restarts": 0, "reason": null,
                                "message": null}}]
    }));
    round_trips::<SecretResponse>(json!({"component": "web", "keys": ["TOKEN"]}));
}

#[test]
fn an_addon_instance_reads_and_writes_back() {
    round_trips::<InstanceResponse>(json!({
        "id": "i-1", "name": "db", "org": "acme", "project": "shop", "project_id": "p-1",
        "definition": "postgres", "version": "16.4.0", "values": {"size": "1Gi"},
        "phase": "Running", "message": "", "revision": 2, "observed_revision": 2,
        "export_secret": "db-exports", "git_commit": null, "gitops_error": null,
        "sync": sync(), "created_at": null, "progress_deadline_seconds": 600,
        "revisions": [{"revision": 1, "operation": "install", "chart_version": "16.4.0",
                       "values": {}, "rollback_to": null, "actor": "ada",
                       "result": "succeeded", "message": "", "created_at": "2026-01-01"}]
    }));
}

#[test]
fn users_and_tokens_read_and_write_back() {
    round_trips::<TokenResponse>(json!({"access_token": "x", "token_type": "Bearer",
        "expires_in": 1800, "username": "ada", "user_id": "u-1"}));
    round_trips::<Vec<UserView>>(json!([{"username": "ada", "id": "u-1",
        "platform_admin": true, "disabled": false, "created_at": "2026-01-01"}]));
}

#[test]
fn a_template_reads_and_writes_back() {
    round_trips::<TemplateResponse>(json!({
        "id": "t-1", "name": "web", "org": "acme", "scope": "project", "project": "shop",
        "cluster": null, "description": "a web server",
        "parameters": [{"name": "image", "type": "string", "default": "nginx",
                        "required": false, "description": ""}],
        "components": [{"name": "web", "type": "workload",
                        "workload_spec": {"image": "${image}"}}],
        "valid": true, "message": "", "created_at": null
    }));
}

#[test]
fn fences_usage_reads_and_writes_back() {
    round_trips::<OrgUsageResponse>(json!({
        "organization": {"scope": "acme", "cluster_id": null,
                         "budget": {"cpu": "8", "memory": null}, "used": amounts()},
        "clusters": [],
        "projects": [{"project": "shop", "project_id": "p-1", "cluster": "edge",
                      "quota": {"cpu": "2", "memory": "4Gi", "storage": null, "pods": null,
                                "load_balancers": 1}, "used": amounts()}]
    }));
}

#[test]
fn alerts_and_the_audit_log_read_and_write_back() {
    round_trips::<Vec<AlertResponse>>(json!([{
        "id": "al-1", "org": "acme", "kind": "cluster_disconnected", "severity": "critical",
        "state": "open", "subject_kind": "cluster", "subject_id": "c-1",
        "subject_name": "edge", "cluster_id": "c-1", "project_id": null, "message": "gone",
        "opened_at": "2026-01-01", "acknowledged_at": null, "acknowledged_by": null,
        "resolved_at": null, "resolution": null
    }]));
    round_trips::<AuditPage>(json!({"continue": "a7", "items": [{
        "id": 7, "actor": "ada", "actor_id": "u-1", "path": "rest", "action": "create",
        "resource_kind": "App", "resource_name": "web", "outcome": "succeeded",
        "status": 201, "at": "2026-01-01", "details": {"dry_run": false}
    }]}));
}

#[test]
fn project_secrets_and_removals_read_and_write_back() {
    round_trips::<IngressCaResponse>(json!({"project": "shop", "secret": "kubenest-ingress-ca",
        "certificate": "-----BEGIN CERTIFICATE-----", "subject": "CN=shop",
        "not_after": "2027-01-01"}));
    round_trips::<RegistryCredentialsResponse>(json!({"project": "shop",
        "secret": "kubenest-registry", "registries": ["registry.internal"]}));
    round_trips::<RemovalResponse>(json!({"state": "deleting",
        "waiting_for": ["the agent of cluster edge"], "removed": [], "left_on_cluster": []}));
}

#[test]
fn a_problem_reads_and_writes_back() {
    round_trips::<Problem>(json!({
        "type": "tag:kubenest.io,2026:problem:conflict", "title": "Conflict", "status": 409,
        "detail": "the App does not converge", "instance": "req-1", "code": "conflict",
        "field": "components[0].workload_spec.image",
        "ways_out": [{"action": "rollback", "method": "POST",
                      "path": "/api/v1/apps/a-1/rollback"},
                     {"action": "patch", "method": "PATCH", "path": "/api/v1/apps/a-1",
                      "components": ["web"]}]
    }));
}

/// The test can fail: a sample with a field the type spells otherwise is not read back.
#[test]
fn a_renamed_field_is_caught() {
    let renamed = json!({"project": "shop", "secret": "s", "registry": ["r"]});
    assert!(serde_json::from_value::<RegistryCredentialsResponse>(renamed).is_err());
}
