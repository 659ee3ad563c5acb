use std::collections::BTreeMap;
use std::sync::Arc;

use kubenest_crds::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use serde_json::{Value, json};

use super::*;

fn project(name: &str, cluster: &str, extra: Value, usage: &[(&str, &str)]) -> Project {
    let mut spec = json!({"cluster": cluster, "namespace": name});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let usage: BTreeMap<&str, &str> = usage.iter().copied().collect();
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "Project",
        "metadata": {"name": name, "namespace": "org-acme"},
        "spec": spec,
        "status": {"usage": usage},
    }))
    .unwrap()
}

fn app(name: &str, project: &str, cpu: &str, replicas: u32) -> App {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name, "namespace": "org-acme"},
        "spec": {"project": project, "components": [
            {"name": "db", "addon": {"definition": "postgres"}},
            {"name": "web", "workload": {"image": "web:1", "replicas": replicas,
                                         "resources": {"cpuRequest": cpu}}},
        ]},
    }))
    .unwrap()
}

fn org(budget: Value) -> Organization {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "Organization",
        "metadata": {"name": "acme"},
        "spec": {"displayName": "Acme", "budget": budget},
    }))
    .unwrap()
}

fn cluster(name: &str) -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "org-acme"},
        "spec": {"provider": "existing"},
    }))
    .unwrap()
}

#[test]
fn an_app_over_its_project_quota_is_refused_with_the_quota_its_use_and_the_field() {
    let projects = [project("shop", "east", json!({"quota": {"cpu": "2"}}), &[])];
    let apps = [Arc::new(app("one", "shop", "500m", 3))];
    let org = org(Value::Null);
    let ledger = Ledger {
        org: &org,
        clusters: &[],
        projects: &projects,
        apps: &apps,
    };
    let refused =
        check_change(&ledger, "shop", "two", &app("two", "shop", "300m", 2).spec).unwrap_err();
    assert_eq!(refused.code, "quota_exceeded");
    assert_eq!(
        refused.field,
        "spec.components[1].workload.resources.cpuRequest"
    );
    assert_eq!(
        refused.reason,
        "project shop's quota of cpu is 2: it uses 1500m and this change adds 600m (2100m in all)"
    );
    // What fits goes through, and so does a lowering however full the project is.
    check_change(&ledger, "shop", "two", &app("two", "shop", "250m", 2).spec).unwrap();
    check_change(&ledger, "shop", "one", &app("one", "shop", "400m", 3).spec).unwrap();
}

#[test]
fn an_app_changed_is_charged_its_difference_not_twice() {
    // The cluster counts the App's running 3 × 500m; raising it to 600m adds 300m, not 1800m.
    let projects = [project(
        "shop",
        "east",
        json!({"quota": {"cpu": "2"}}),
        &[("requests.cpu", "1500m")],
    )];
    let apps = [Arc::new(app("one", "shop", "500m", 3))];
    let org = org(Value::Null);
    let ledger = Ledger {
        org: &org,
        clusters: &[],
        projects: &projects,
        apps: &apps,
    };
    check_change(&ledger, "shop", "one", &app("one", "shop", "600m", 3).spec).unwrap();
    let refused =
        check_change(&ledger, "shop", "one", &app("one", "shop", "700m", 3).spec).unwrap_err();
    assert!(
        refused.reason.contains("(2100m in all)"),
        "{}",
        refused.reason
    );
}

#[test]
fn what_the_cluster_reports_counts_when_it_is_more_than_the_specs() {
    // A chart's pods are seen by the cluster only: 1800m reported, 0 declared.
    let projects = [project(
        "shop",
        "east",
        json!({"quota": {"cpu": "2"}}),
        &[("requests.cpu", "1800m")],
    )];
    let org = org(Value::Null);
    let ledger = Ledger {
        org: &org,
        clusters: &[],
        projects: &projects,
        apps: &[],
    };
    let refused =
        check_change(&ledger, "shop", "x", &app("x", "shop", "300m", 1).spec).unwrap_err();
    assert!(
        refused.reason.contains("it uses 1800m"),
        "{}",
        refused.reason
    );
}

#[test]
fn an_organization_budget_refuses_the_fifth_cpu_across_clusters_with_room_each() {
    let projects = [
        project("east-shop", "east", json!({}), &[]),
        project("west-shop", "west", json!({}), &[("requests.cpu", "2")]),
    ];
    let apps = [
        Arc::new(app("a", "east-shop", "1", 2)),
        Arc::new(app("b", "west-shop", "1", 2)),
    ];
    let org = org(json!({"cpu": "4"}));
    let clusters = [cluster("east"), cluster("west")];
    let ledger = Ledger {
        org: &org,
        clusters: &clusters,
        projects: &projects,
        apps: &apps,
    };
    let refused = check_change(
        &ledger,
        "east-shop",
        "c",
        &app("c", "east-shop", "1", 1).spec,
    )
    .unwrap_err();
    assert_eq!(refused.code, "budget_exceeded");
    assert_eq!(
        refused.reason,
        "the budget of organization acme for cpu is 4: it uses 4 and this change adds 1 (5 in all)"
    );
    // Every project's use in one pass is each project's own.
    let uses = project_uses(&ledger);
    for name in ["east-shop", "west-shop"] {
        assert_eq!(uses[name], project_use(&ledger, name), "{name}");
    }
    assert_eq!(uses.len(), 2);
    // A request without an amount of its own is charged the project's default, named by its
    // replicas.
    let mut defaulted = app("c", "east-shop", "1", 1);
    if let Some(w) = defaulted.spec.components[1].workload.as_mut() {
        w.resources = None;
    }
    check_change(&ledger, "east-shop", "c", &defaulted.spec).unwrap();
    let projects = [
        project(
            "east-shop",
            "east",
            json!({"defaults": {"cpuRequest": "250m"}}),
            &[],
        ),
        project("west-shop", "west", json!({}), &[("requests.cpu", "3900m")]),
    ];
    let ledger = Ledger {
        projects: &projects,
        ..ledger
    };
    let refused = check_change(&ledger, "east-shop", "c", &defaulted.spec).unwrap_err();
    assert_eq!(refused.field, "spec.components[1].workload.replicas");
}

#[test]
fn a_cluster_budget_counts_only_the_projects_on_that_cluster() {
    let projects = [
        project("east-shop", "east", json!({}), &[("requests.cpu", "1")]),
        project("west-shop", "west", json!({}), &[("requests.cpu", "8")]),
    ];
    let mut east = cluster("east");
    east.spec.budget = Some(kubenest_crds::fences::Budget {
        cpu: Some("2".into()),
        memory: None,
    });
    let clusters = [east, cluster("west")];
    let org = org(Value::Null);
    let ledger = Ledger {
        org: &org,
        clusters: &clusters,
        projects: &projects,
        apps: &[],
    };
    check_change(
        &ledger,
        "east-shop",
        "c",
        &app("c", "east-shop", "1", 1).spec,
    )
    .unwrap();
    let refused = check_change(
        &ledger,
        "east-shop",
        "c",
        &app("c", "east-shop", "1", 2).spec,
    )
    .unwrap_err();
    assert!(
        refused
            .reason
            .starts_with("the budget of cluster east for cpu is 2:"),
        "{}",
        refused.reason
    );
}

#[test]
fn an_addon_is_refused_only_by_a_project_with_no_room_left() {
    let full = [project(
        "shop",
        "east",
        json!({"quota": {"pods": 3}}),
        &[("pods", "3")],
    )];
    let org = org(Value::Null);
    let ledger = Ledger {
        org: &org,
        clusters: &[],
        projects: &full,
        apps: &[],
    };
    let refused = check_room(&ledger, "shop").unwrap_err();
    assert_eq!(
        (
            refused.code,
            refused.field.as_str(),
            refused.reason.as_str()
        ),
        (
            "quota_exceeded",
            "spec.project",
            "project shop's quota of pods is 3: it uses 3, and an addon's pods need room"
        )
    );
    let roomy = [project(
        "shop",
        "east",
        json!({"quota": {"pods": 4}}),
        &[("pods", "3")],
    )];
    check_room(
        &Ledger {
            projects: &roomy,
            ..ledger
        },
        "shop",
    )
    .unwrap();
}
