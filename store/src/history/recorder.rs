//! Group commit for deployment rows.
//!
//! When a controller takes on many Apps at once (a restart, a GitOps sync of a whole repository)
//! every reconcile records its deployment at the same moment. Writing each row in a transaction of
//! its own costs a lookup of the App's latest deployment, an insert, an update of the older
//! pending rows and a commit: five round trips per row. The recorder queues the requests and a
//! few writer tasks each take whatever has queued up (at most [`MAX_BATCH`]) and write it in one
//! transaction of four statements, however many rows it holds. A caller still gets its answer only
//! after the commit, so "recorded before dispatched" holds exactly as it did row by row.
//!
//! A batch that fails (one bad row breaks the transaction) is written again row by row, so one
//! request's error never becomes another's.
//!
//! In such a burst the work after a row (the App's writes to the management API server, the
//! dispatch) competes for the same cores as the rows still being recorded, and recording crawls
//! while the first Apps are dispatched. [`Recorder::recorded_burst`] lets a caller wait until the
//! rows requested alongside its own are committed too (bounded), so a burst records all its
//! intents first, in a few large batches, and then dispatches. A burst is when a writer has
//! taken [`BURST_ROWS`] rows or more at once since the recorder was last idle; steady traffic,
//! even from many Apps, gathers a few rows per batch and never waits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{Mutex, Notify, mpsc, oneshot};
use uuid::Uuid;

use super::deployments::{Deployment, NewDeployment, Operation, Row};
use crate::error::StoreError;

/// The most rows one transaction writes.
pub const MAX_BATCH: usize = 1024;
/// How often a writer yields to let more requests queue before it writes a batch.
const GATHER_YIELDS: u32 = 4;
/// Requests waiting for a writer before callers wait to queue.
const QUEUE: usize = 4096;
/// How long the recorder must have been idle for a burst to be over.
const BURST_GAP: Duration = Duration::from_millis(5);
/// Rows taken in one batch that make a burst.
const BURST_ROWS: usize = 16;

/// What a caller gets back: the row, and whether this call inserted it.
pub type Recorded = Result<(Deployment, bool), StoreError>;

/// One deployment to record.
#[derive(Debug)]
struct Request {
    new: NewDeployment,
    /// Take `spec_before` from the App's latest deployment and derive the operation from it.
    derive: bool,
    reply: oneshot::Sender<Recorded>,
}

/// The queue in front of the writer tasks.
#[derive(Debug, Clone)]
pub struct Recorder {
    queue: mpsc::Sender<Request>,
    in_flight: Arc<InFlight>,
}

/// Requests asked for and not yet answered, and a signal when none are left.
#[derive(Debug, Default)]
struct InFlight {
    count: AtomicUsize,
    none: Notify,
    /// A batch of [`BURST_ROWS`] or more was taken since the count was last zero.
    burst: AtomicBool,
}

/// Counts one request in flight until dropped (answered, failed or cancelled alike).
struct Pending(Arc<InFlight>);

impl Pending {
    fn new(in_flight: &Arc<InFlight>) -> Self {
        in_flight.count.fetch_add(1, Ordering::SeqCst);
        Self(in_flight.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.burst.store(false, Ordering::SeqCst);
            self.0.none.notify_waiters();
        }
    }
}

impl Recorder {
    /// Starts `writers` writer tasks on `pool`; they stop when the last `Recorder` is dropped.
    pub fn start(pool: PgPool, writers: usize) -> Self {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let receiver = Arc::new(Mutex::new(receiver));
        let in_flight = Arc::<InFlight>::default();
        for _ in 0..writers.max(1) {
            tokio::spawn(writer(pool.clone(), receiver.clone(), in_flight.clone()));
        }
        Self { queue, in_flight }
    }

    /// Records `new`; with `derive`, its `spec_before` and `operation` are replaced by what
    /// follows from the App's latest deployment.
    pub async fn record(&self, new: NewDeployment, derive: bool) -> Recorded {
        let _pending = Pending::new(&self.in_flight);
        let (reply, answer) = oneshot::channel();
        let request = Request { new, derive, reply };
        self.queue
            .send(request)
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// In a burst, returns once the rows requested alongside the caller's are committed as
    /// well (no recording in flight, nor a moment later), or after `at_most`. Outside a burst,
    /// at once.
    pub async fn recorded_burst(&self, at_most: Duration) {
        if self.idle() || !self.in_flight.burst.load(Ordering::SeqCst) {
            return;
        }
        let deadline = tokio::time::Instant::now() + at_most;
        let until_deadline = || tokio::time::sleep_until(deadline);
        loop {
            loop {
                let none = self.in_flight.none.notified();
                if self.idle() {
                    break;
                }
                tokio::select! {
                    () = none => {}
                    () = until_deadline() => return,
                }
            }
            // A burst's requests come in over a while (each as its reconcile gets to it): the
            // burst is over once none has come for a moment.
            tokio::select! {
                () = tokio::time::sleep(BURST_GAP) => {}
                () = until_deadline() => return,
            }
            if self.idle() {
                return;
            }
        }
    }

    fn idle(&self) -> bool {
        self.in_flight.count.load(Ordering::SeqCst) == 0
    }
}

async fn writer(
    pool: PgPool,
    queue: Arc<Mutex<mpsc::Receiver<Request>>>,
    in_flight: Arc<InFlight>,
) {
    loop {
        let batch = {
            let mut receiver = queue.lock().await;
            let Some(first) = receiver.recv().await else {
                return;
            };
            let mut batch = vec![first];
            // Give callers that are ready to run a moment to queue up behind the first (as
            // PostgreSQL's commit_delay does): a yield, not a timer, so an idle store adds no
            // latency.
            let mut yields = 0;
            while batch.len() < MAX_BATCH {
                match receiver.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) if yields < GATHER_YIELDS => {
                        yields += 1;
                        tokio::task::yield_now().await;
                    }
                    Err(_) => break,
                }
            }
            batch
        };
        if batch.len() >= BURST_ROWS {
            in_flight.burst.store(true, Ordering::SeqCst);
        }
        for round in rounds(batch) {
            write(&pool, round).await;
        }
    }
}

/// Splits a batch so that no round holds two rows of one App: the later row supersedes the
/// earlier one, so it must be written after it. An App's k-th row goes to round k.
fn rounds(batch: Vec<Request>) -> Vec<Vec<Request>> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut rounds: Vec<Vec<Request>> = Vec::new();
    for request in batch {
        let app = (request.new.org_id.clone(), request.new.app_id.clone());
        let index = seen.entry(app).or_insert(0);
        if rounds.len() <= *index {
            rounds.push(Vec::new());
        }
        rounds[*index].push(request);
        *index += 1;
    }
    rounds
}

async fn write(pool: &PgPool, mut round: Vec<Request>) {
    match write_batch(pool, &mut round).await {
        Ok(results) => {
            for (request, result) in round.into_iter().zip(results) {
                let _ = request.reply.send(result);
            }
        }
        Err(error) => {
            tracing::debug!(%error, rows = round.len(), "batch failed; recording row by row");
            for mut request in round {
                let result = write_one(pool, &mut request).await;
                let _ = request.reply.send(result);
            }
        }
    }
}

async fn write_one(pool: &PgPool, request: &mut Request) -> Recorded {
    let mut results = write_batch(pool, std::slice::from_mut(request)).await?;
    results.pop().unwrap_or(Err(StoreError::Closed))
}

/// Writes one round in one transaction; the results are in the order of `round`.
async fn write_batch(pool: &PgPool, round: &mut [Request]) -> Result<Vec<Recorded>, StoreError> {
    let mut tx = pool.begin().await?;
    derive_changes(&mut tx, round).await?;
    let ids: Vec<Uuid> = round.iter().map(|_| Uuid::new_v4()).collect();
    let column = |f: fn(&NewDeployment) -> String| -> Vec<String> {
        round.iter().map(|r| f(&r.new)).collect()
    };
    let inserted: Vec<Row> = sqlx::query_as(
        "INSERT INTO deployments (id, intent_key, org_id, project_id, cluster_id, app_id, app_name,
             revision, operation, actor, spec_before, spec_after, rollback_of)
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
             $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::jsonb[],
             $12::jsonb[], $13::uuid[])
         ON CONFLICT (intent_key) DO NOTHING
         RETURNING *",
    )
    .bind(&ids)
    .bind(column(|n| n.intent_key.clone()))
    .bind(column(|n| n.org_id.clone()))
    .bind(column(|n| n.project_id.clone()))
    .bind(column(|n| n.cluster_id.clone()))
    .bind(column(|n| n.app_id.clone()))
    .bind(column(|n| n.app_name.clone()))
    .bind(column(|n| n.revision.clone()))
    .bind(column(|n| n.operation.as_str().to_owned()))
    .bind(column(|n| n.actor.clone()))
    .bind(
        round
            .iter()
            .map(|r| r.new.spec_before.clone())
            .collect::<Vec<Option<Value>>>(),
    )
    .bind(
        round
            .iter()
            .map(|r| r.new.spec_after.clone())
            .collect::<Vec<Value>>(),
    )
    .bind(
        round
            .iter()
            .map(|r| r.new.rollback_of)
            .collect::<Vec<Option<Uuid>>>(),
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut by_key: BTreeMap<String, (Row, bool)> = inserted
        .into_iter()
        .map(|row| (row.intent_key.clone(), (row, true)))
        .collect();

    let missing: Vec<String> = column(|n| n.intent_key.clone())
        .into_iter()
        .filter(|key| !by_key.contains_key(key))
        .collect();
    if !missing.is_empty() {
        let existing: Vec<Row> =
            sqlx::query_as("SELECT * FROM deployments WHERE intent_key = ANY($1)")
                .bind(&missing)
                .fetch_all(&mut *tx)
                .await?;
        by_key.extend(
            existing
                .into_iter()
                .map(|row| (row.intent_key.clone(), (row, false))),
        );
    }

    let fresh: Vec<&Row> = by_key
        .values()
        .filter(|(_, inserted)| *inserted)
        .map(|(row, _)| row)
        .collect();
    if !fresh.is_empty() {
        sqlx::query(
            "UPDATE deployments d SET status = 'superseded', finished_at = now(),
                 message = 'superseded by deployment ' || n.id::text
             FROM UNNEST($1::text[], $2::text[], $3::uuid[]) AS n(org_id, app_id, id)
             WHERE d.org_id = n.org_id AND d.app_id = n.app_id AND d.status = 'pending'
                 AND d.id <> n.id",
        )
        .bind(fresh.iter().map(|r| r.org_id.clone()).collect::<Vec<_>>())
        .bind(fresh.iter().map(|r| r.app_id.clone()).collect::<Vec<_>>())
        .bind(fresh.iter().map(|r| r.id).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;

    Ok(round
        .iter()
        .map(|request| {
            let Some((row, inserted)) = by_key.get(&request.new.intent_key) else {
                return Err(StoreError::NotFound);
            };
            // An intent key names one App's change: the same key from elsewhere is a conflict.
            if row.org_id != request.new.org_id || row.app_id != request.new.app_id {
                return Err(StoreError::Conflict {
                    constraint: "deployments_intent_key_unique".into(),
                });
            }
            Ok((row.clone().try_into()?, *inserted))
        })
        .collect())
}

/// Fills `spec_before` and `operation` of the deriving requests from each App's latest row.
async fn derive_changes(
    tx: &mut sqlx::PgConnection,
    round: &mut [Request],
) -> Result<(), StoreError> {
    let deriving: Vec<(String, String)> = round
        .iter()
        .filter(|r| r.derive)
        .map(|r| (r.new.org_id.clone(), r.new.app_id.clone()))
        .collect();
    if deriving.is_empty() {
        return Ok(());
    }
    let latest: Vec<(String, String, Value)> = sqlx::query_as(
        "SELECT DISTINCT ON (d.org_id, d.app_id) d.org_id, d.app_id, d.spec_after
         FROM deployments d
         JOIN UNNEST($1::text[], $2::text[]) AS k(org_id, app_id)
             ON d.org_id = k.org_id AND d.app_id = k.app_id
         ORDER BY d.org_id, d.app_id, d.created_at DESC, d.id DESC",
    )
    .bind(
        deriving
            .iter()
            .map(|(org, _)| org.clone())
            .collect::<Vec<_>>(),
    )
    .bind(
        deriving
            .iter()
            .map(|(_, app)| app.clone())
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut *tx)
    .await?;
    let latest: BTreeMap<(String, String), Value> = latest
        .into_iter()
        .map(|(org, app, spec)| ((org, app), spec))
        .collect();
    for request in round.iter_mut().filter(|r| r.derive) {
        let key = (request.new.org_id.clone(), request.new.app_id.clone());
        let before = latest.get(&key).cloned();
        request.new.operation = Operation::between(before.as_ref(), &request.new.spec_after);
        request.new.spec_before = before;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(app: &str, key: &str) -> Request {
        let (reply, _) = oneshot::channel();
        Request {
            new: NewDeployment {
                intent_key: key.into(),
                org_id: "acme".into(),
                project_id: "p".into(),
                cluster_id: "c".into(),
                app_id: app.into(),
                app_name: app.into(),
                revision: "r".into(),
                operation: Operation::Create,
                actor: "a".into(),
                spec_before: None,
                spec_after: Value::Null,
                rollback_of: None,
            },
            derive: false,
            reply,
        }
    }

    fn keys(rounds: &[Vec<Request>]) -> Vec<Vec<&str>> {
        rounds
            .iter()
            .map(|r| r.iter().map(|q| q.new.intent_key.as_str()).collect())
            .collect()
    }

    #[test]
    fn distinct_apps_share_one_round() {
        let batch = vec![request("a", "a1"), request("b", "b1"), request("c", "c1")];
        assert_eq!(keys(&rounds(batch)), vec![vec!["a1", "b1", "c1"]]);
    }

    #[test]
    fn a_later_row_of_the_same_app_waits_for_the_earlier_one() {
        let batch = vec![
            request("a", "a1"),
            request("b", "b1"),
            request("a", "a2"),
            request("c", "c1"),
            request("a", "a3"),
            request("b", "b2"),
        ];
        assert_eq!(
            keys(&rounds(batch)),
            vec![vec!["a1", "b1", "c1"], vec!["a2", "b2"], vec!["a3"]]
        );
    }

    #[test]
    fn each_apps_rows_go_to_successive_rounds() {
        let batch = vec![
            request("a", "a1"),
            request("a", "a2"),
            request("a", "a3"),
            request("c", "c1"),
            request("c", "c2"),
        ];
        assert_eq!(
            keys(&rounds(batch)),
            vec![vec!["a1", "c1"], vec!["a2", "c2"], vec!["a3"]]
        );
    }
}
