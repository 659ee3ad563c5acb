// An App's live objects as a tree (pure): the API lists them flat, each naming its owners'
// uids; an object whose owners are not in the list is a root.
import type { Schemas } from "./api/client";

export type LiveObject = Schemas["LiveObjectView"];
export type Health = LiveObject["status"]["health"];

export type TreeNode = { object: LiveObject; children: TreeNode[] };

// Workloads first, then what routes to them, then storage and the rest.
const KIND_ORDER = ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet", "Pod", "Service", "Ingress", "PersistentVolumeClaim"];

function rank(kind: string): number {
  const at = KIND_ORDER.indexOf(kind);
  return at < 0 ? KIND_ORDER.length : at;
}

function byKindThenName(a: TreeNode, b: TreeNode): number {
  return rank(a.object.kind) - rank(b.object.kind) || a.object.kind.localeCompare(b.object.kind) || a.object.name.localeCompare(b.object.name);
}

/// The tree of `objects`: each object under its first owner that is listed. Every object
/// appears exactly once, whatever the owners say (a cycle or a repeated uid cannot loop).
export function buildTree(objects: LiveObject[]): TreeNode[] {
  const nodes = new Map<string, TreeNode>();
  for (const object of objects) if (!nodes.has(object.uid)) nodes.set(object.uid, { object, children: [] });
  const parentOf = new Map<string, string>();
  for (const { object } of nodes.values()) {
    const parent = object.owners.find((o) => o !== object.uid && nodes.has(o));
    if (parent !== undefined) parentOf.set(object.uid, parent);
  }
  // An object whose chain of owners comes back to itself is a root.
  const reachesRoot = (uid: string): boolean => {
    const seen = new Set<string>([uid]);
    for (let at = parentOf.get(uid); at !== undefined; at = parentOf.get(at)) {
      if (seen.has(at)) return false;
      seen.add(at);
    }
    return true;
  };
  const roots: TreeNode[] = [];
  for (const node of nodes.values()) {
    const parent = parentOf.get(node.object.uid);
    if (parent !== undefined && reachesRoot(node.object.uid)) nodes.get(parent)!.children.push(node);
    else roots.push(node);
  }
  const sort = (list: TreeNode[]) => {
    list.sort(byKindThenName);
    list.forEach((n) => sort(n.children));
  };
  sort(roots);
  return roots;
}

/// The badge tone of a health.
export function toneOf(health: Health): "ok" | "warn" | "bad" | "info" {
  switch (health) {
    case "ready":
      return "ok";
    case "progressing":
      return "info";
    case "failed":
      return "bad";
    default:
      return "warn";
  }
}

/// The status in a few words: `ready 2/2`, `Running 1/1 · 3 restarts`, `CrashLoopBackOff`.
export function summary(status: LiveObject["status"]): string {
  const parts: string[] = [];
  if (status.phase) parts.push(status.phase);
  if (status.ready != null && status.desired != null) parts.push(`${status.ready}/${status.desired} ready`);
  if (status.restarts) parts.push(`${status.restarts} restart${status.restarts === 1 ? "" : "s"}`);
  if (status.reason) parts.push(status.reason);
  return parts.join(" · ");
}
