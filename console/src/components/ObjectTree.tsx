// The App's live objects on its cluster as a collapsible tree (Deployment → ReplicaSet → Pod,
// Services, Ingresses, addons' objects), each with its status. Asked of the cluster on open,
// on the refresh button, and again when an event about the App arrives.
import { useState } from "react";
import { ApiFailure, api, ok } from "../api/client";
import { useLoad, type Loaded } from "../load";
import { buildTree, summary, toneOf, type TreeNode } from "../objectTree";
import { Badge, ErrorNote, When } from "./ui";

type Answer = { nodes: TreeNode[]; truncated: boolean; takenAt: string };

/// The App's objects as a tree, loaded again whenever `refreshOn` changes.
export function useAppObjects(appId: string, refreshOn: unknown): Loaded<Answer> {
  return useLoad(async () => {
    const answer = ok(await api.GET("/api/v1/apps/{id}/objects", { params: { path: { id: appId } } }));
    return { nodes: buildTree(answer.objects), truncated: answer.truncated, takenAt: answer.taken_at };
  }, [appId, refreshOn]);
}

export function ObjectTree({ appId, refreshOn }: { appId: string; refreshOn?: unknown }) {
  const objects = useAppObjects(appId, refreshOn);
  // Before the first delivery there is nothing to list: not an error to alert about.
  const notDeployed = objects.error instanceof ApiFailure && objects.error.code === "not_deployed";
  return (
    <section aria-label="Objects on the cluster" data-testid="object-tree">
      <h2>Objects on the cluster</h2>
      <p className="row">
        <button type="button" onClick={objects.reload} disabled={objects.loading}>
          {objects.loading ? "Refreshing…" : "Refresh"}
        </button>
        {objects.data && (
          <small>
            listed <When at={objects.data.takenAt} />
          </small>
        )}
      </p>
      {notDeployed ? <p>Not on its cluster yet.</p> : <ErrorNote error={objects.error} />}
      {objects.data && objects.data.nodes.length === 0 && <p>The cluster has no objects of this App.</p>}
      {objects.data && objects.data.nodes.length > 0 && (
        <ul className="object-tree" aria-label="Objects of this App">
          {objects.data.nodes.map((n) => (
            <Node key={n.object.uid} node={n} />
          ))}
        </ul>
      )}
      {objects.data?.truncated && <p role="note">The cluster has more objects than one answer holds; some are not shown.</p>}
    </section>
  );
}

function Node({ node }: { node: TreeNode }) {
  const [open, setOpen] = useState(true);
  const { object, children } = node;
  const words = summary(object.status);
  return (
    <li data-testid="object" data-kind={object.kind}>
      <span className="object-line">
        {children.length > 0 ? (
          <button type="button" className="toggle" aria-expanded={open} aria-label={`${object.kind} ${object.name}: show what it owns`} onClick={() => setOpen(!open)}>
            {open ? "▾" : "▸"}
          </button>
        ) : (
          <span className="toggle" aria-hidden="true" />
        )}
        <span className="object-kind">{object.kind}</span> <code>{object.name}</code>{" "}
        <Badge tone={toneOf(object.status.health)}>{object.status.health}</Badge>
        {words && <small> {words}</small>}
        {object.status.message && <small className="object-message" title={object.status.message}> — {object.status.message}</small>}
      </span>
      {open && children.length > 0 && (
        <ul>
          {children.map((c) => (
            <Node key={c.object.uid} node={c} />
          ))}
        </ul>
      )}
    </li>
  );
}
