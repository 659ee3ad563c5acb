//! Where an App's time goes: the stages the watches of both clusters see, and the watches.

use super::*;

/// Where an App's time goes, as watches of the management and the workload cluster see it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Stage {
    /// The App object exists on the management cluster.
    Stored,
    /// The agent stored its StackDeploy on the workload cluster.
    Accepted,
    /// The agent created the Deployment.
    Applied,
    /// The Deployment is Ready (scheduled, kwok's pod Ready, the ReplicaSet and Deployment
    /// controllers caught up).
    Ready,
    /// The agent wrote Running into the StackDeploy's status (right after it sent the report).
    Observed,
    /// The App's status says Running on the management cluster.
    Reported,
    /// The API's event stream said so.
    Streamed,
}

/// How many stages there are.
pub(super) const STAGES: usize = 7;

/// When each App reached each stage, by App id.
#[derive(Debug, Clone, Default)]
pub(super) struct Stages {
    seen: Arc<Mutex<HashMap<String, [Option<Instant>; STAGES]>>>,
    changed: Arc<tokio::sync::Notify>,
    /// The watches and streams marking stages.
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Stages {
    pub(super) fn mark(&self, app_id: &str, stage: Stage) {
        let mut seen = self.seen.lock().unwrap();
        seen.entry(app_id.to_owned()).or_default()[stage as usize].get_or_insert_with(Instant::now);
        self.changed.notify_waiters();
    }

    pub(super) fn get(&self, app_id: &str) -> [Option<Instant>; STAGES] {
        self.seen
            .lock()
            .unwrap()
            .get(app_id)
            .copied()
            .unwrap_or_default()
    }

    /// How many of `keys` reached `stage`.
    pub(super) fn count(&self, keys: &[String], stage: Stage) -> usize {
        let seen = self.seen.lock().unwrap();
        keys.iter()
            .filter(|k| seen.get(*k).is_some_and(|s| s[stage as usize].is_some()))
            .count()
    }

    pub(super) fn keep(&self, task: tokio::task::JoinHandle<()>) {
        self.tasks.lock().unwrap().push(task);
    }

    /// Stops every watch and stream marking stages.
    pub(super) fn stop(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Waits until `app_id` reaches `stage`.
    pub(super) async fn reached(&self, app_id: &str, stage: Stage) {
        loop {
            let changed = self.changed.notified();
            if self.get(app_id)[stage as usize].is_some() {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), changed).await;
        }
    }

    /// Marks [`Stage::Streamed`] from the API's event stream of a project, resuming after the
    /// last event it saw if the stream ends, as a console's `EventSource` does.
    pub(super) async fn stream(&self, admin: &Client, project_id: &str) {
        let mut events = EventStream::open_filtered(admin.base(), admin, "project_id", project_id)
            .await
            .unwrap();
        let (this, admin, project_id) = (self.clone(), admin.clone(), project_id.to_owned());
        self.keep(tokio::spawn(async move {
            let mut last: Option<String> = None;
            loop {
                while let Ok(event) = events.next().await {
                    if event.id.is_some() {
                        last.clone_from(&event.id);
                    }
                    if event.kind == "app.phase"
                        && event.data["phase"] == "Running"
                        && let Some(app_id) = event.data["app_id"].as_str()
                    {
                        this.mark(app_id, Stage::Streamed);
                    }
                }
                eprintln!("  the event stream of {project_id} ended; resuming after {last:?}");
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let resumed = EventStream::resume_filtered(
                        admin.base(),
                        &admin,
                        "project_id",
                        &project_id,
                        last.as_deref(),
                    );
                    if let Ok(resumed) = resumed.await {
                        events = resumed;
                        break;
                    }
                }
            }
        }));
    }

    /// Watches `resource` on `client`, marking what `stages` says of each object.
    pub(super) fn watch(
        &self,
        client: kube::Client,
        resource: ApiResource,
        config: watcher::Config,
        stages: fn(&DynamicObject) -> Vec<(String, Stage)>,
    ) {
        let this = self.clone();
        self.keep(tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            // With a backoff: once the clusters stop, errors must not spin.
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event
                {
                    for (app_id, stage) in stages(&object) {
                        this.mark(&app_id, stage);
                    }
                }
            }
        }));
    }

    /// Marks [`Stage::Ready`] for the peer's Deployments on `client`.
    pub(super) fn watch_direct(&self, client: kube::Client) {
        self.watch(
            client,
            ApiResource::erase::<Deployment>(&()),
            watcher::Config::default().fields(&format!("metadata.namespace={DIRECT_NS}")),
            direct_stages,
        );
    }
}

pub(super) fn app_stages(app: &DynamicObject) -> Vec<(String, Stage)> {
    let Some(uid) = app.metadata.uid.clone() else {
        return Vec::new();
    };
    let mut stages = vec![(uid.clone(), Stage::Stored)];
    if app.data["status"]["phase"] == "Running" {
        stages.push((uid, Stage::Reported));
    }
    stages
}

pub(super) fn stack_deploy_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(kubenest_crds::names::labels::APP_ID))
        .map(|id| {
            let mut stages = vec![(id.clone(), Stage::Accepted)];
            if object.data["status"]["phase"] == "Running" {
                stages.push((id.clone(), Stage::Observed));
            }
            stages
        })
        .unwrap_or_default()
}

pub(super) fn deployment_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    let Some(id) = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(kubenest_crds::names::labels::APP_ID))
    else {
        return Vec::new();
    };
    let mut stages = vec![(id.clone(), Stage::Applied)];
    let status = &object.data["status"];
    if status["readyReplicas"] == 1
        && status["updatedReplicas"] == 1
        && status["observedGeneration"].as_i64() == object.metadata.generation
    {
        stages.push((id.clone(), Stage::Ready));
    }
    stages
}

/// Starts the watches behind [`Stages`] for the latency rounds: the kubenest path on one
/// workload cluster, and the peer's Deployments there.
pub(super) fn track(management: kube::Client, workload: kube::Client) -> Stages {
    let stages = track_apps(management, std::slice::from_ref(&workload));
    stages.watch_direct(workload);
    stages
}

/// Starts the watches of the kubenest path: Apps on the management cluster, StackDeploys and
/// Deployments on each of `workloads`.
pub(super) fn track_apps(management: kube::Client, workloads: &[kube::Client]) -> Stages {
    let stages = Stages::default();
    let kubenest = |kind: &str, plural: &str| ApiResource {
        group: "kubenest.io".into(),
        version: "v1alpha1".into(),
        api_version: "kubenest.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    stages.watch(
        management,
        kubenest("App", "apps"),
        watcher::Config::default(),
        app_stages,
    );
    let labelled = watcher::Config::default().labels(kubenest_crds::names::labels::APP_ID);
    for workload in workloads {
        stages.watch(
            workload.clone(),
            kubenest("StackDeploy", "stackdeploys"),
            labelled.clone(),
            stack_deploy_stages,
        );
        stages.watch(
            workload.clone(),
            ApiResource::erase::<Deployment>(&()),
            labelled.clone(),
            deployment_stages,
        );
    }
    stages
}

/// Each stage's share of the time from `started` (ms since the stage before; NaN where a stage
/// was not seen).
pub(super) fn stage_shares(started: Instant, seen: [Option<Instant>; STAGES]) -> [f64; STAGES] {
    let mut shares = [f64::NAN; STAGES];
    let mut before = started;
    for (share, at) in shares.iter_mut().zip(seen) {
        if let Some(at) = at {
            *share = at.saturating_duration_since(before).as_secs_f64() * 1000.0;
            before = before.max(at);
        }
    }
    shares
}

/// The stages' names, in [`Stage`] order.
pub(super) const STAGE_NAMES: [&str; STAGES] = [
    "stored", "accepted", "applied", "ready", "observed", "reported", "streamed",
];

/// Percentile `p` of each stage's shares, by stage name (stages never seen are left out).
pub(super) fn stage_percentile(shares: &[Vec<f64>], p: f64) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for (name, all) in STAGE_NAMES.into_iter().zip(shares) {
        let mut all: Vec<f64> = all.iter().copied().filter(|v| v.is_finite()).collect();
        all.sort_by(f64::total_cmp);
        if !all.is_empty() {
            out.insert(
                name.to_owned(),
                json!((super::percentile(&all, p) * 10.0).round() / 10.0),
            );
        }
    }
    out
}

/// Which fields of the Apps' status change, over all their writes: how many times each
/// top-level status field changed between one version of an App and the next, as a watch of
/// the management cluster sees them (a write the watch coalesced counts once).
#[derive(Debug, Clone, Default)]
pub(super) struct StatusChanges {
    counts: Arc<Mutex<HashMap<String, f64>>>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl StatusChanges {
    /// Starts counting on `management`.
    pub(super) fn watch(management: kube::Client) -> Self {
        let this = Self::default();
        let counts = this.counts.clone();
        let resource = ApiResource {
            group: "kubenest.io".into(),
            version: "v1alpha1".into(),
            api_version: "kubenest.io/v1alpha1".into(),
            kind: "App".into(),
            plural: "apps".into(),
        };
        let task = tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(management, &resource);
            let mut last: HashMap<String, Value> = HashMap::new();
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Apply(app) | watcher::Event::InitApply(app)) = event else {
                    continue;
                };
                let Some(uid) = app.metadata.uid.clone() else {
                    continue;
                };
                let status = app.data["status"].clone();
                let before = last.insert(uid, status.clone()).unwrap_or(Value::Null);
                let mut counts = counts.lock().unwrap();
                *counts.entry("(versions)".into()).or_default() += 1.0;
                let (Some(new), old) = (status.as_object(), before.as_object()) else {
                    continue;
                };
                for (field, value) in new {
                    if old.and_then(|o| o.get(field)) != Some(value) {
                        *counts.entry(field.clone()).or_default() += 1.0;
                    }
                }
                // Which condition changed, to what reason, and in what part.
                let listed = |status: &Value| -> Vec<Value> {
                    status["conditions"].as_array().cloned().unwrap_or_default()
                };
                let old_conditions = listed(&before);
                for condition in listed(&status) {
                    let kind = condition["type"].as_str().unwrap_or("?").to_owned();
                    let was = old_conditions
                        .iter()
                        .find(|c| c["type"] == condition["type"]);
                    if was == Some(&condition) {
                        continue;
                    }
                    let reason = condition["reason"].as_str().unwrap_or("?");
                    let part = match was {
                        None => "new",
                        Some(w) if w["reason"] != condition["reason"] => "reason",
                        Some(w) if w["status"] != condition["status"] => "status",
                        Some(w) if w["message"] != condition["message"] => "message",
                        Some(_) => "other",
                    };
                    *counts
                        .entry(format!("conditions[{kind}] {part} -> {reason}"))
                        .or_default() += 1.0;
                }
            }
        });
        *this.task.lock().unwrap() = Some(task);
        this
    }

    /// Stops counting, and returns each field's changes per App of `apps`, the most first.
    pub(super) fn stop(&self, apps: usize) -> serde_json::Map<String, Value> {
        if let Some(task) = self.task.lock().unwrap().take() {
            task.abort();
        }
        let counts = self.counts.lock().unwrap().clone();
        super::largest_per_sample(&counts, apps, 1.0, 0.1)
    }
}
