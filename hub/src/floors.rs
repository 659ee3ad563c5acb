//! Revocation floors: for every registered cluster, its organization and the lowest token
//! version the hub still admits. Pushed by the controllers; held in memory only.
//!
//! A floor never goes down: token versions only ever rise, and a floor raised directly (by the
//! REST facade rotating a token) must not be undone by a snapshot the controllers computed from
//! a cache that has not seen the rotation yet.
//!
//! A replica that has no complete snapshot, or whose snapshot is older than the freshness window,
//! refuses every agent with 503: admitting agents unverified after a (predictable) restart would
//! give an attacker a window to aim for. Controllers therefore re-send the snapshot periodically.

use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use kubenest_contracts::{Floor, FloorsSnapshot, FloorsUpdate, Id};
use uuid::Uuid;

/// Why an agent is not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No fresh floors yet: retry later (503).
    Unavailable,
    /// Admission is denied for this token (403).
    Forbidden(&'static str),
}

#[derive(Debug, Default)]
struct State {
    floors: HashMap<Id, Floor>,
    fresh_at: Option<Instant>,
    pending: Option<Pending>,
}

/// Parts of a snapshot received so far.
#[derive(Debug)]
struct Pending {
    snapshot_id: Uuid,
    parts: u32,
    received: BTreeSet<u32>,
    floors: Vec<Floor>,
}

/// The floors a replica holds.
#[derive(Debug)]
pub struct Floors {
    state: RwLock<State>,
    max_age: Duration,
}

impl Floors {
    /// Empty floors (every agent refused with 503) that go stale `max_age` after the last
    /// snapshot or update.
    pub fn new(max_age: Duration) -> Self {
        Self {
            state: RwLock::new(State::default()),
            max_age,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a complete snapshot arrived within the freshness window.
    pub fn is_fresh(&self) -> bool {
        self.read()
            .fresh_at
            .is_some_and(|at| at.elapsed() <= self.max_age)
    }

    /// Decides whether an agent with this token may connect.
    pub fn admit(&self, cluster_id: &Id, org_id: &Id, token_version: u64) -> Result<(), Refusal> {
        if !self.is_fresh() {
            return Err(Refusal::Unavailable);
        }
        let state = self.read();
        let floor = state
            .floors
            .get(cluster_id)
            .ok_or(Refusal::Forbidden("cluster is not registered"))?;
        if &floor.org_id != org_id {
            return Err(Refusal::Forbidden(
                "token organization is not the cluster's",
            ));
        }
        if token_version < floor.min_token_version {
            return Err(Refusal::Forbidden(
                "token is below the cluster's revocation floor",
            ));
        }
        Ok(())
    }

    /// Whether a live session with this token may stay, whatever the freshness: used to cut
    /// sessions when a floor rises.
    pub fn permits(&self, cluster_id: &Id, org_id: &Id, token_version: u64) -> bool {
        self.read()
            .floors
            .get(cluster_id)
            .is_some_and(|f| &f.org_id == org_id && token_version >= f.min_token_version)
    }

    /// The registered organization of a cluster.
    pub fn org_of(&self, cluster_id: &Id) -> Option<Id> {
        self.read().floors.get(cluster_id).map(|f| f.org_id.clone())
    }

    /// Applies one part of a snapshot. When the last part arrives the snapshot replaces every
    /// floor, and the clusters whose admission may have changed are returned.
    pub fn apply_snapshot(&self, part: FloorsSnapshot) -> Result<Vec<Id>, String> {
        if part.part == 0 || part.part > part.parts {
            return Err(format!(
                "part {} of {} is out of range",
                part.part, part.parts
            ));
        }
        let mut state = self.write();
        let restart = state
            .pending
            .as_ref()
            .is_none_or(|p| p.snapshot_id != part.snapshot_id || p.parts != part.parts);
        if restart {
            state.pending = Some(Pending {
                snapshot_id: part.snapshot_id,
                parts: part.parts,
                received: BTreeSet::new(),
                floors: Vec::new(),
            });
        }
        let Some(pending) = state.pending.as_mut() else {
            return Err("no snapshot in progress".into());
        };
        if pending.received.insert(part.part) {
            pending.floors.extend(part.floors);
        }
        if pending.received.len() < pending.parts as usize {
            return Ok(Vec::new());
        }
        let complete = state.pending.take().map(|p| p.floors).unwrap_or_default();
        let new: HashMap<Id, Floor> = complete
            .into_iter()
            .map(|f| {
                let kept = never_lower(state.floors.get(&f.cluster_id), f);
                (kept.cluster_id.clone(), kept)
            })
            .collect();
        let mut affected: Vec<Id> = state
            .floors
            .iter()
            .filter(|(id, old)| new.get(*id).is_none_or(|f| tightens(old, f)))
            .map(|(id, _)| id.clone())
            .collect();
        affected.sort();
        state.floors = new;
        state.fresh_at = Some(Instant::now());
        Ok(affected)
    }

    /// Applies changed floors at once and returns the clusters whose floor rose or whose
    /// organization changed. An update also proves the controllers are alive, so it keeps an
    /// existing snapshot fresh.
    pub fn apply_update(&self, update: FloorsUpdate) -> Vec<Id> {
        let mut state = self.write();
        let mut affected = Vec::new();
        for floor in update.floors {
            if state
                .floors
                .get(&floor.cluster_id)
                .is_some_and(|old| tightens(old, &floor))
            {
                affected.push(floor.cluster_id.clone());
            }
            let kept = never_lower(state.floors.get(&floor.cluster_id), floor);
            state.floors.insert(kept.cluster_id.clone(), kept);
        }
        if state.fresh_at.is_some() {
            state.fresh_at = Some(Instant::now());
        }
        affected
    }
}

/// `new`, but never below the version `old` already required of the same organization's cluster.
fn never_lower(old: Option<&Floor>, new: Floor) -> Floor {
    match old {
        Some(old) if old.org_id == new.org_id && old.min_token_version > new.min_token_version => {
            Floor {
                min_token_version: old.min_token_version,
                ..new
            }
        }
        _ => new,
    }
}

fn tightens(old: &Floor, new: &Floor) -> bool {
    new.min_token_version > old.min_token_version || new.org_id != old.org_id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(cluster: &str, org: &str, min: u64) -> Floor {
        Floor {
            cluster_id: Id::from(cluster),
            org_id: Id::from(org),
            min_token_version: min,
        }
    }

    fn snapshot(id: Uuid, part: u32, parts: u32, floors: Vec<Floor>) -> FloorsSnapshot {
        FloorsSnapshot {
            snapshot_id: id,
            part,
            parts,
            floors,
        }
    }

    #[test]
    fn agents_are_refused_until_a_complete_snapshot_arrives() {
        let floors = Floors::new(Duration::from_secs(60));
        let (c1, acme) = (Id::from("c1"), Id::from("acme"));
        assert_eq!(floors.admit(&c1, &acme, 1), Err(Refusal::Unavailable));
        let id = Uuid::new_v4();
        floors
            .apply_snapshot(snapshot(id, 1, 2, vec![floor("c1", "acme", 1)]))
            .unwrap();
        assert_eq!(
            floors.admit(&c1, &acme, 1),
            Err(Refusal::Unavailable),
            "half a snapshot"
        );
        floors
            .apply_snapshot(snapshot(id, 2, 2, vec![floor("c2", "acme", 1)]))
            .unwrap();
        assert_eq!(floors.admit(&c1, &acme, 1), Ok(()));
        assert_eq!(floors.admit(&Id::from("c2"), &acme, 5), Ok(()));
    }

    #[test]
    fn admission_checks_registration_org_and_version() {
        let floors = Floors::new(Duration::from_secs(60));
        floors
            .apply_snapshot(snapshot(Uuid::new_v4(), 1, 1, vec![floor("c1", "acme", 3)]))
            .unwrap();
        let (c1, acme) = (Id::from("c1"), Id::from("acme"));
        assert!(matches!(
            floors.admit(&Id::from("c9"), &acme, 3),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(
            floors.admit(&c1, &Id::from("evil"), 3),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(
            floors.admit(&c1, &acme, 2),
            Err(Refusal::Forbidden(_))
        ));
        assert_eq!(floors.admit(&c1, &acme, 3), Ok(()));
    }

    #[test]
    fn raising_a_floor_reports_the_cluster() {
        let floors = Floors::new(Duration::from_secs(60));
        floors
            .apply_snapshot(snapshot(
                Uuid::new_v4(),
                1,
                1,
                vec![floor("c1", "acme", 1), floor("c2", "acme", 1)],
            ))
            .unwrap();
        let affected = floors.apply_update(FloorsUpdate {
            floors: vec![floor("c1", "acme", 2), floor("c2", "acme", 1)],
        });
        assert_eq!(affected, vec![Id::from("c1")]);
        let affected = floors
            .apply_snapshot(snapshot(Uuid::new_v4(), 1, 1, vec![floor("c1", "acme", 2)]))
            .unwrap();
        assert_eq!(
            affected,
            vec![Id::from("c2")],
            "a cluster gone from the snapshot is cut"
        );
    }

    #[test]
    fn a_floor_never_goes_down_for_the_same_organization() {
        let floors = Floors::new(Duration::from_secs(60));
        let (c1, acme) = (Id::from("c1"), Id::from("acme"));
        floors
            .apply_snapshot(snapshot(Uuid::new_v4(), 1, 1, vec![floor("c1", "acme", 1)]))
            .unwrap();
        // The REST facade raised it; a snapshot from a cache behind that change follows.
        assert_eq!(
            floors.apply_update(FloorsUpdate {
                floors: vec![floor("c1", "acme", 2)]
            }),
            vec![c1.clone()]
        );
        let affected = floors
            .apply_snapshot(snapshot(Uuid::new_v4(), 1, 1, vec![floor("c1", "acme", 1)]))
            .unwrap();
        assert!(affected.is_empty(), "{affected:?}");
        assert!(matches!(
            floors.admit(&c1, &acme, 1),
            Err(Refusal::Forbidden(_))
        ));
        floors.apply_update(FloorsUpdate {
            floors: vec![floor("c1", "acme", 1)],
        });
        assert!(
            !floors.permits(&c1, &acme, 1),
            "an update does not lower it either"
        );
        assert_eq!(floors.admit(&c1, &acme, 2), Ok(()));
    }

    #[test]
    fn floors_go_stale() {
        let floors = Floors::new(Duration::from_millis(0));
        floors
            .apply_snapshot(snapshot(Uuid::new_v4(), 1, 1, vec![floor("c1", "acme", 1)]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!floors.is_fresh());
        assert_eq!(
            floors.admit(&Id::from("c1"), &Id::from("acme"), 1),
            Err(Refusal::Unavailable)
        );
    }
}
