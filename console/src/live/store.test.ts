import { describe, expect, it } from "vitest";
import type { App, Cluster } from "../api/client";
import { initial, KEPT_EVENTS, reduce, type LiveEvent } from "./store";

const app = (id: string): App => ({
  id,
  name: id,
  org: "acme",
  project: "shop",
  phase: "Pending",
  message: "",
  paused: false,
  progress_deadline_seconds: 600,
  components: [],
  component_status: [],
  sync: { drift_detected: false, drift_details: [] },
  conditions: [],
});

const event = (id: number, kind: string, more: Record<string, unknown> = {}): LiveEvent => ({
  id,
  kind,
  org: "acme",
  app_id: "a1",
  at: "2026-01-01T00:00:00Z",
  ...more,
});

describe("the event reducer", () => {
  const loaded = reduce(initial, { type: "apps", apps: [app("a1")] });

  it("changes an App's phase and message in place", () => {
    const next = reduce(loaded, { type: "event", event: event(1, "app.phase", { phase: "Running", message: "all ready" }) });
    expect(next.apps.a1?.phase).toBe("Running");
    expect(next.apps.a1?.message).toBe("all ready");
    expect(next.events).toHaveLength(1);
  });

  it("records drift and its healing", () => {
    const details = [{ resource: "Deployment/shop-web", field: "spec.replicas", desired: "2", observed: "5", manager: "kubectl-scale" }];
    let next = reduce(loaded, { type: "event", event: event(2, "app.drift", { drift_detected: true, drift_class: "recoverable", drift_details: details }) });
    expect(next.apps.a1?.sync).toEqual({ drift_detected: true, drift_class: "recoverable", drift_details: details });
    next = reduce(next, { type: "event", event: event(3, "app.drift", { drift_detected: false, drift_details: [] }) });
    expect(next.apps.a1?.sync.drift_detected).toBe(false);
  });

  it("counts deployments so the history reloads, and takes the new revision", () => {
    const next = reduce(loaded, { type: "event", event: event(4, "deployment", { deployment_id: "d2", revision: "r2" }) });
    expect(next.deployments.a1).toBe(1);
    expect(next.apps.a1?.revision).toBe("r2");
  });

  it("ignores an event seen before (a resumed stream repeats)", () => {
    const once = reduce(loaded, { type: "event", event: event(5, "deployment") });
    expect(reduce(once, { type: "event", event: event(5, "deployment") })).toBe(once);
  });

  it("forgets a deleted App and remembers that it was deleted", () => {
    const next = reduce(loaded, { type: "event", event: event(6, "app.deleted") });
    expect(next.apps.a1).toBeUndefined();
    expect(next.deleted.a1).toBe(true);
  });

  it("changes a cluster's state", () => {
    const cluster = { id: "c1", state: "connected" } as Cluster;
    let next = reduce(initial, { type: "clusters", clusters: [cluster] });
    next = reduce(next, { type: "event", event: { ...event(7, "cluster.state", { state: "disconnected" }), app_id: null, cluster_id: "c1" } });
    expect(next.clusters.c1?.state).toBe("disconnected");
  });

  it("keeps only the newest events", () => {
    let next = loaded;
    for (let i = 1; i <= KEPT_EVENTS + 10; i++) next = reduce(next, { type: "event", event: event(i, "other") });
    expect(next.events).toHaveLength(KEPT_EVENTS);
    expect(next.events[0]?.id).toBe(11);
  });
});
