//! One door, as a property: Apps generated from the API's own OpenAPI document (and, for an
//! addon component's values, from its AddonDefinition's values schema) are each either refused
//! at the door — a 4xx in the API's error shape, naming the field when one is at fault — or,
//! once accepted, run: on the whole system (`common`: hub replicas, controllers, API server,
//! agents on real clusters with kwok nodes, PostgreSQL) they reach `Running`, never `Failed`
//! and never stuck with `InvalidCommand`.
//!
//! The generator walks the document's schemas: every required property, each optional one at
//! random, numbers at and beyond their bounds, and for strings a pool of values per property
//! name (the document says `string`; the pools hold what such a field may and may not be).
//! Most values are ones a user means; a few per App are wrong, so both sides of the door are
//! reached in every run. The seed is printed: `make test` runs a fixed one (CI must not depend on
//! luck); `KUBENEST_PROPERTY_SEED=random` draws a new one, `KUBENEST_PROPERTY_SEED=<n>` replays.
//!
//! Workloads are image workloads: a `git` or `helm` source needs a Git server or a chart
//! repository this property does not make (`agent/tests/builds/builds.rs` and
//! `agent/tests/it/chart_workloads.rs` run those). Replicas stay small: kwok would run 1000 pods,
//! but on two cores that would measure the scheduler, not the door. Addon persistence stays
//! off: kwok nodes have no storage provisioner.

use std::time::{Duration, Instant};

use crate::common::{CONVERGE, fixture, run};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

/// The seed `make test` runs with, so that CI is the same every run: one that found a way past
/// the door once (a catalog addon's open `resources`). `KUBENEST_PROPERTY_SEED=random` explores.
const DEFAULT_SEED: u64 = 9127199204434835799;

/// How many Apps one run sends.
const APPS: usize = 36;

const OPENAPI: &str = include_str!("../../../apiserver/openapi.json");

/// Values of string properties by name: (what such a field may be, what it may not).
fn strings(property: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match property {
        "image" => (
            &[
                "nginx:1.27",
                "shop:1",
                "images.example.test/team/web:2.1",
                "busybox",
            ],
            &["", "Bad Image!", "UPPER/case:1"],
        ),
        "host" => (
            &["shop.example.test", "api.shop.example.test"],
            &["Bad Host!", "", "a..example.test", "-edge.example.test"],
        ),
        "path" => (&["/", "/api", "/healthz"], &["no-slash", "", "/a b"]),
        "cpu_request" | "cpu_limit" => (&["100m", "1", "250m"], &["lots", "-1", "1 core"]),
        "memory_request" | "memory_limit" => (&["64Mi", "1Gi", "512Mi"], &["1 banana", "-5Mi"]),
        "size" => (&["1Gi", "512Mi"], &["big", "1GB"]),
        "user" | "database" => (&["app", "orders", "shop_db"], &["Bad User", "1st", ""]),
        "definition" => (&["postgres", "redis", "kafka"], &["mysql", ""]),
        "version" => (&["1.0.0"], &["latest", "1.0", "9.9.9"]),
        // Env names; component names come from `component_name`.
        "name" => (
            &["PORT", "GREETING", "LOG_LEVEL"],
            &["1BAD", "has space", ""],
        ),
        "value" => (&["8080", "hello", ""], &[]),
        "export" => (&["host", "port", "password"], &["nope"]),
        "component" => (&["db", "cache"], &["web", ""]),
        _ => (&["x"], &[""]),
    }
}

/// Component names: a few the Apps share (so duplicates and export references meet).
const COMPONENTS: [&str; 4] = ["web", "db", "cache", "api"];

struct Generator<'a> {
    doc: &'a Value,
    /// `name` → values schema of each catalog AddonDefinition.
    definitions: &'a Map<String, Value>,
    rng: StdRng,
    /// How likely one value is wrong.
    wrong: f64,
}

impl Generator<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference.trim_start_matches("#/components/schemas/");
                &self.doc["components"]["schemas"][name]
            }
            None => schema,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'v>(&mut self, values: &[&'v str]) -> &'v str {
        values[self.rng.random_range(0..values.len())]
    }

    /// A value of `schema` for property `property`.
    fn value(&mut self, schema: &Value, property: &str) -> Value {
        let schema = self.resolve(schema).clone();
        if let Some(choices) = schema["anyOf"].as_array() {
            let concrete: Vec<&Value> = choices.iter().filter(|c| c["type"] != "null").collect();
            if concrete.is_empty() || self.chance(0.05) {
                return Value::Null;
            }
            let branch = concrete[self.rng.random_range(0..concrete.len())].clone();
            return self.value(&branch, property);
        }
        if let Some(values) = schema["enum"].as_array() {
            if self.chance(self.wrong / 2.0) {
                return json!("neither");
            }
            return values[self.rng.random_range(0..values.len())].clone();
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec!["object"],
        };
        let concrete = types.iter().find(|t| **t != "null").copied();
        if types.contains(&"null") && self.chance(0.1) {
            return Value::Null;
        }
        match concrete.unwrap_or("null") {
            "object" => self.object(&schema, property),
            "array" => self.array(&schema, property),
            "string" => self.string(property),
            "integer" => self.integer(&schema, property),
            "boolean" => json!(self.chance(0.5)),
            _ => Value::Null,
        }
    }

    fn object(&mut self, schema: &Value, property: &str) -> Value {
        let Some(properties) = schema["properties"].as_object() else {
            return self.free_object(property);
        };
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, sub) in properties {
            // Image workloads only (see the module's note).
            if matches!(name.as_str(), "git" | "helm") {
                continue;
            }
            let keep = required.contains(&name.as_str()) || self.chance(0.45);
            if !keep {
                continue;
            }
            let value = match name.as_str() {
                "values" if property == "addon_spec" => Value::Null, // set by `component`
                // kwok nodes have no storage provisioner (devenv/src/system/catalog.rs): a
                // claim would wait for ever. agent/tests/real_node/real_node.rs runs them on the real node.
                "enabled" if property == "persistence" => json!(false),
                _ => self.value(sub, name),
            };
            out.insert(name.clone(), value);
        }
        if self.chance(self.wrong / 4.0) {
            out.insert("unknown_field".into(), json!(1));
        }
        Value::Object(out)
    }

    /// An object the document leaves open (`resources` of an addon's values).
    fn free_object(&mut self, property: &str) -> Value {
        match property {
            "resources" if self.chance(self.wrong) => {
                json!({"requests": {"cpu": "lots"}})
            }
            "resources" => json!({"requests": {"cpu": "100m", "memory": "64Mi"}}),
            _ => json!({}),
        }
    }

    fn array(&mut self, schema: &Value, property: &str) -> Value {
        let max = schema["maxItems"].as_u64().unwrap_or(3).min(3);
        let min = schema["minItems"].as_u64().unwrap_or(0).min(max);
        let len = self.rng.random_range(min..=max);
        let items = &schema["items"];
        Value::Array((0..len).map(|_| self.value(items, property)).collect())
    }

    fn string(&mut self, property: &str) -> Value {
        let (good, bad) = strings(property);
        if !bad.is_empty() && self.chance(self.wrong) {
            json!(self.pick(bad))
        } else {
            json!(self.pick(good))
        }
    }

    fn integer(&mut self, schema: &Value, property: &str) -> Value {
        let min = schema["minimum"].as_i64().unwrap_or(0);
        let max = schema["maximum"].as_i64().unwrap_or(i64::from(u32::MAX));
        if self.chance(self.wrong) {
            return json!(if self.chance(0.5) { min - 1 } else { max + 1 });
        }
        let (low, high) = match property {
            "replicas" => (min, 3),
            "period_seconds" | "initial_delay_seconds" => (min, 30),
            "progress_deadline_seconds" => (300, 900),
            _ => (min, max.min(9000)),
        };
        json!(self.rng.random_range(low..=high.max(low)))
    }

    /// One component: mostly coherent (a workload with its spec, an addon with its), its
    /// values for an addon from the definition's own schema.
    fn component(&mut self, schema: &Value, index: usize) -> Value {
        let mut component = self.value(schema, "component");
        let name = if self.chance(self.wrong / 2.0) {
            "Bad_Name".to_owned()
        } else {
            COMPONENTS[index % COMPONENTS.len()].to_owned()
        };
        component["name"] = json!(name);
        if self.chance(1.0 - self.wrong) {
            let addon = component["type"] == "addon";
            let schemas = &self.doc["components"]["schemas"];
            if addon {
                if component["addon_spec"].is_null() {
                    component["addon_spec"] =
                        self.value(&schemas["AddonBody"].clone(), "addon_spec");
                }
                component.as_object_mut().unwrap().remove("workload_spec");
            } else {
                if component["workload_spec"].is_null() {
                    component["workload_spec"] =
                        self.value(&schemas["WorkloadBody"].clone(), "workload_spec");
                }
                if component["workload_spec"]
                    .get("image")
                    .is_none_or(Value::is_null)
                {
                    component["workload_spec"]["image"] = self.string("image");
                }
                component.as_object_mut().unwrap().remove("addon_spec");
            }
        }
        if let Some(spec) = component.get_mut("addon_spec").filter(|s| s.is_object()) {
            let definition = spec["definition"].as_str().unwrap_or_default().to_owned();
            let values = match self.definitions.get(&definition).cloned() {
                Some(values_schema) if self.chance(0.7) => self.value(&values_schema, "values"),
                _ => json!({}),
            };
            spec["values"] = values;
        }
        component
    }

    /// One App for project `project_id`, named `name` (or, rarely, a name that is no label).
    fn app(&mut self, project_id: &str, name: &str) -> Value {
        let body = self.doc["components"]["schemas"]["NewAppBody"].clone();
        let mut app = self.object(&body, "app");
        app["project_id"] = json!(project_id);
        app["name"] = json!(if self.chance(self.wrong / 2.0) {
            "Bad App"
        } else {
            name
        });
        let count = self.rng.random_range(1..=3);
        let component = body["properties"]["components"]["items"].clone();
        let components: Vec<Value> = (0..count).map(|i| self.component(&component, i)).collect();
        app["components"] = Value::Array(components);
        app
    }
}

/// What the door answered, or how an accepted App ended.
#[derive(Debug)]
enum Outcome {
    Refused,
    Ran,
}

#[test]
fn every_generated_app_is_refused_at_the_door_with_its_field_or_runs() {
    run(async {
        let mut f = fixture().await;
        let (project_id, namespace) = f.project("east", "gen").await;
        let ingresses: kube::Api<k8s_openapi::api::networking::v1::Ingress> =
            kube::Api::namespaced(f.workload("east").await, &namespace);
        let mut admin = f.admin().await;
        let seed = match std::env::var("KUBENEST_PROPERTY_SEED").ok().as_deref() {
            Some("random") => rand::random::<u64>(),
            Some(seed) => seed
                .parse()
                .expect("KUBENEST_PROPERTY_SEED is a number or `random`"),
            None => DEFAULT_SEED,
        };
        eprintln!("generated apps: seed {seed} (KUBENEST_PROPERTY_SEED={seed} replays it)");
        let catalog = admin.get("/api/v1/addon-definitions").await.unwrap();
        let definitions: Map<String, Value> = catalog
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().to_owned(),
                    d["values_schema"].clone(),
                )
            })
            .collect();
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        let mut generator = Generator {
            doc: &doc,
            definitions: &definitions,
            rng: StdRng::seed_from_u64(seed),
            wrong: 0.06,
        };

        let mut accepted = Vec::new();
        let mut outcomes = Vec::new();
        for i in 0..APPS {
            let app = generator.app(&project_id, &format!("gen-{i}"));
            match admin.post("/api/v1/apps", &app).await {
                Ok(created) => {
                    accepted.push((created["id"].as_str().unwrap().to_owned(), app));
                }
                Err(kubenest_cli::api::ApiError::Status {
                    status,
                    code,
                    message,
                    field,
                    ..
                }) => {
                    assert!(
                        (400..500).contains(&status) && code != "unknown",
                        "seed {seed}: {status} {code} {message} for\n{app:#}"
                    );
                    if status == 422 {
                        let field = field.unwrap_or_else(|| {
                            panic!("seed {seed}: a 422 naming no field ({message}) for\n{app:#}")
                        });
                        let root = field.split(['.', '[']).next().unwrap();
                        assert!(
                            app.get(root).is_some() || root == "components",
                            "seed {seed}: field {field} is not the App's for\n{app:#}"
                        );
                    }
                    outcomes.push(Outcome::Refused);
                }
                Err(other) => panic!("seed {seed}: {other} for\n{app:#}"),
            }
        }

        // Every accepted App runs.
        let deadline = Instant::now() + CONVERGE * 2;
        for (id, app) in &accepted {
            loop {
                f.check_running();
                let live = admin.get(&format!("/api/v1/apps/{id}")).await.unwrap();
                let phase = live["phase"].as_str().unwrap_or_default().to_owned();
                let conditions = live["conditions"].to_string();
                // The cluster refusing an object is a failure now, not at the deadline.
                let refused = live["component_status"]
                    .to_string()
                    .contains("cannot apply");
                assert!(
                    phase != "Failed" && !conditions.contains("InvalidCommand") && !refused,
                    "seed {seed}: accepted, then {phase}: {live:#}\nsent:\n{app:#}"
                );
                if phase == "Running" {
                    outcomes.push(Outcome::Ran);
                    break;
                }
                // kwok clusters run no ingress controller: an App with an ingress waits for
                // its address (saying so), which the test publishes as a controller would.
                if live["component_status"]
                    .to_string()
                    .contains("no ingress controller has published an address")
                {
                    publish_addresses(&ingresses, id).await;
                }
                assert!(
                    Instant::now() < deadline,
                    "seed {seed}: accepted and not Running: {live:#}\nsent:\n{app:#}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        for (id, _) in &accepted {
            admin.delete(&format!("/api/v1/apps/{id}")).await.unwrap();
        }
        let ran = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Ran))
            .count();
        eprintln!(
            "generated apps: {ran} of {APPS} ran, {} refused at the door",
            APPS - ran
        );
        // Both sides of the door were reached: a generator that only made one kind proves
        // half the property.
        assert!(ran > 0 && ran < APPS, "seed {seed}: {ran} of {APPS} ran");
    });
}

/// Publishes an address for each Ingress of App `id` that has none, as an ingress controller
/// does once it serves one.
async fn publish_addresses(
    ingresses: &kube::Api<k8s_openapi::api::networking::v1::Ingress>,
    id: &str,
) {
    let labelled = kube::api::ListParams::default().labels(&format!("kubenest.io/app-id={id}"));
    let address = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}});
    for ingress in ingresses.list(&labelled).await.unwrap() {
        let name = ingress.metadata.name.unwrap_or_default();
        ingresses
            .patch_status(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&address),
            )
            .await
            .unwrap();
    }
}
