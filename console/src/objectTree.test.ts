import { describe, expect, it } from "vitest";
import { buildTree, summary, toneOf, type LiveObject, type TreeNode } from "./objectTree";

function object(kind: string, name: string, uid: string, owners: string[] = [], health: LiveObject["status"]["health"] = "ready"): LiveObject {
  return { kind, name, uid, owners, status: { health } } as LiveObject;
}

function shape(nodes: TreeNode[]): unknown[] {
  return nodes.map((n) => (n.children.length ? [`${n.object.kind}/${n.object.name}`, shape(n.children)] : `${n.object.kind}/${n.object.name}`));
}

describe("the object tree", () => {
  it("hangs each object under its owner: Deployment → ReplicaSet → Pod, Services beside", () => {
    const tree = buildTree([
      object("Pod", "web-7d-b", "p2", ["rs"]),
      object("Service", "web", "svc"),
      object("Pod", "web-7d-a", "p1", ["rs"]),
      object("ReplicaSet", "web-7d", "rs", ["d"]),
      object("Deployment", "web", "d"),
      object("StatefulSet", "db", "s"),
      object("Pod", "db-0", "p3", ["s"]),
    ]);
    expect(shape(tree)).toEqual([
      ["Deployment/web", [["ReplicaSet/web-7d", ["Pod/web-7d-a", "Pod/web-7d-b"]]]],
      ["StatefulSet/db", ["Pod/db-0"]],
      "Service/web",
    ]);
  });

  it("makes an object whose owner is not listed a root", () => {
    expect(shape(buildTree([object("Pod", "orphan", "p", ["gone"])]))).toEqual(["Pod/orphan"]);
  });

  it("shows every object once, even when owners loop or a uid repeats", () => {
    const tree = buildTree([object("Job", "a", "a", ["b"]), object("Job", "b", "b", ["a"]), object("Pod", "self", "s", ["s"]), object("Pod", "self", "s")]);
    const count = (nodes: TreeNode[]): number => nodes.reduce((n, node) => n + 1 + count(node.children), 0);
    expect(count(tree)).toBe(3);
  });

  it("says how an object is doing in a few words and a tone", () => {
    expect(summary({ health: "failed", phase: "Running", ready: 0, desired: 1, restarts: 7, reason: "CrashLoopBackOff" })).toBe("Running · 0/1 ready · 7 restarts · CrashLoopBackOff");
    expect(toneOf("ready")).toBe("ok");
    expect(toneOf("failed")).toBe("bad");
    expect(toneOf("progressing")).toBe("info");
    expect(toneOf("unknown")).toBe("warn");
  });
});
