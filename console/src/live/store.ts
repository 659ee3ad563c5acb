// The console's one store: what the pages fetched, kept current by the live stream's events
// (a reducer, so every page that shows an App or a cluster changes in place).
import { useSyncExternalStore } from "react";
import type { App, Cluster } from "../api/client";
import type { ConnectionState, LiveEvent } from "./types";

export type { ConnectionState, LiveEvent };

export type State = {
  connection: ConnectionState;
  apps: Record<string, App>;
  clusters: Record<string, Cluster>;
  /// Apps the stream said were deleted (a page showing one says so).
  deleted: Record<string, true>;
  /// The newest events, oldest first, for the timelines.
  events: LiveEvent[];
  /// Counts the deployments seen per App, so a page showing its history reloads it.
  deployments: Record<string, number>;
};

export type Action =
  | { type: "apps"; apps: App[] }
  | { type: "clusters"; clusters: Cluster[] }
  | { type: "event"; event: LiveEvent }
  | { type: "connection"; state: ConnectionState }
  | { type: "reset" };

/// Events kept for the timelines.
export const KEPT_EVENTS = 500;

export const initial: State = {
  connection: "connecting",
  apps: {},
  clusters: {},
  deleted: {},
  events: [],
  deployments: {},
};

function byId<T extends { id: string }>(into: Record<string, T>, items: T[]): Record<string, T> {
  const next = { ...into };
  for (const item of items) next[item.id] = item;
  return next;
}

/// What an event changes in an App it is about.
function applyToApp(app: App, event: LiveEvent): App {
  switch (event.kind) {
    case "app.phase":
      return {
        ...app,
        phase: String(event.phase ?? app.phase),
        message: typeof event.message === "string" ? event.message : app.message,
        paused: event.phase === "Paused" ? true : app.paused && event.phase !== "Running",
      };
    case "app.drift":
      return {
        ...app,
        sync: {
          drift_detected: Boolean(event.drift_detected),
          drift_class: (event.drift_class as string | null | undefined) ?? null,
          drift_details: (event.drift_details as App["sync"]["drift_details"]) ?? [],
        },
      };
    case "deployment":
      return {
        ...app,
        deployment_id: (event.deployment_id as string | undefined) ?? app.deployment_id,
        revision: (event.revision as string | null | undefined) ?? app.revision,
      };
    default:
      return app;
  }
}

export function reduce(state: State, action: Action): State {
  switch (action.type) {
    case "apps":
      return { ...state, apps: byId(state.apps, action.apps) };
    case "clusters":
      return { ...state, clusters: byId(state.clusters, action.clusters) };
    case "connection":
      return { ...state, connection: action.state };
    case "reset":
      return initial;
    case "event":
      return onEvent(state, action.event);
  }
}

function onEvent(state: State, event: LiveEvent): State {
  // A resumed stream may repeat what was already seen.
  if (state.events.some((e) => e.id === event.id)) return state;
  const events = [...state.events, event].slice(-KEPT_EVENTS);
  let { apps, clusters, deleted, deployments } = state;
  const appId = event.app_id ?? undefined;
  if (appId && event.kind === "app.deleted") {
    apps = { ...apps };
    delete apps[appId];
    deleted = { ...deleted, [appId]: true };
  } else if (appId && apps[appId]) {
    apps = { ...apps, [appId]: applyToApp(apps[appId], event) };
  }
  if (appId && event.kind === "deployment") {
    deployments = { ...deployments, [appId]: (deployments[appId] ?? 0) + 1 };
  }
  const clusterId = event.cluster_id ?? undefined;
  if (event.kind === "cluster.state" && clusterId && clusters[clusterId]) {
    clusters = { ...clusters, [clusterId]: { ...clusters[clusterId], state: String(event.state) } };
  }
  return { ...state, events, apps, clusters, deleted, deployments };
}

let state = initial;
const listeners = new Set<() => void>();

export const store = {
  get: () => state,
  dispatch(action: Action) {
    state = reduce(state, action);
    listeners.forEach((l) => l());
  },
  subscribe(listener: () => void) {
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  },
};

/// A slice of the store; the component renders again when the slice changes.
export function useStore<T>(select: (s: State) => T): T {
  return useSyncExternalStore(store.subscribe, () => select(store.get()));
}

/// The id of the newest kept event that `matches` (0 when none): a page that lists what the
/// store does not hold (addons, say) puts it in its load's dependencies, so a matching event
/// reloads the page instead of a poll.
export function useNewestEvent(matches: (e: LiveEvent) => boolean): number {
  return useStore((s) => {
    for (let i = s.events.length - 1; i >= 0; i--) {
      if (matches(s.events[i]!)) return s.events[i]!.id;
    }
    return 0;
  });
}
