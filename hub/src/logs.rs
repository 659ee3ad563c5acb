//! Log streams through the hub, fail-closed: a `logs.subscribe` routed to an agent opens a
//! route from that subscription to the backend session that sent it, and the agent's
//! `log.lines` and `log.end` for it go to that session only — never fanned out, queued or
//! kept. When the agent's session ends, the subscriber is told (`log.end`, reason
//! `session_dropped`); when the subscriber's session ends, the agent is told to stop
//! (`logs.unsubscribe`).
//!
//! An `objects.request` opens the same kind of route, for one answer: its `objects.snapshot`
//! goes to the asking session only and closes the route.

use std::collections::HashMap;
use std::sync::Mutex;

use kubenest_contracts::Id;

use crate::sessions::Outbox;

/// What a route carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteKind {
    /// A log stream: `log.lines` until a `log.end`.
    Logs,
    /// One `objects.snapshot`.
    Objects,
}

/// Where one subscription's frames go.
#[derive(Debug, Clone)]
pub(crate) struct LogRoute {
    pub kind: RouteKind,
    pub backend_session: u64,
    pub backend: Outbox,
    pub agent_session: u64,
    pub org_id: Id,
}

/// The open log routes of this replica, by (cluster, subscription id).
#[derive(Debug, Default)]
pub(crate) struct LogRoutes {
    routes: Mutex<HashMap<(Id, String), LogRoute>>,
}

impl LogRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Id, String), LogRoute>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens (or re-opens, for a re-sent subscribe) a route.
    pub fn open(&self, cluster_id: &Id, subscription_id: &str, route: LogRoute) {
        self.lock()
            .insert((cluster_id.clone(), subscription_id.to_owned()), route);
    }

    /// The subscriber of a subscription.
    pub fn subscriber(&self, cluster_id: &Id, subscription_id: &str) -> Option<Outbox> {
        self.lock()
            .get(&(cluster_id.clone(), subscription_id.to_owned()))
            .map(|r| r.backend.clone())
    }

    /// Closes a route; its subscriber, if it was open.
    pub fn close(&self, cluster_id: &Id, subscription_id: &str) -> Option<Outbox> {
        self.lock()
            .remove(&(cluster_id.clone(), subscription_id.to_owned()))
            .map(|r| r.backend)
    }

    /// Closes the routes through an agent session that ended: (subscription id, route).
    pub fn agent_gone(&self, cluster_id: &Id, agent_session: u64) -> Vec<(String, LogRoute)> {
        let mut routes = self.lock();
        let gone: Vec<(Id, String)> = routes
            .iter()
            .filter(|((c, _), r)| c == cluster_id && r.agent_session == agent_session)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|key| routes.remove(&key).map(|r| (key.1, r)))
            .collect()
    }

    /// Closes the routes of a backend session that ended: (cluster, subscription id, org, kind).
    pub fn backend_gone(&self, backend_session: u64) -> Vec<(Id, String, Id, RouteKind)> {
        let mut routes = self.lock();
        let gone: Vec<(Id, String)> = routes
            .iter()
            .filter(|(_, r)| r.backend_session == backend_session)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|key| {
                routes
                    .remove(&key)
                    .map(|r| (key.0, key.1, r.org_id, r.kind))
            })
            .collect()
    }

    /// Open routes.
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}
