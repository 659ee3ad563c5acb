// A deployment's diff (an RFC 6902 JSON Patch from the spec before to the spec after) as rows
// people read: what happened, where, and the new value.

export type DiffRow = { op: "added" | "removed" | "changed" | "moved" | "copied"; path: string; value?: string; from?: string };

const OPS: Record<string, DiffRow["op"]> = {
  add: "added",
  remove: "removed",
  replace: "changed",
  move: "moved",
  copy: "copied",
};

/// `/components/1/workload_spec/image` as `components[1].workload_spec.image` (RFC 6901
/// escapes undone).
export function pointerToPath(pointer: string): string {
  if (pointer === "") return "(whole spec)";
  return pointer
    .split("/")
    .slice(1)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), "");
}

function show(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/// The rows of a patch; anything that is not a patch operation (or `test`) shows nothing.
export function diffRows(diff: unknown): DiffRow[] {
  if (!Array.isArray(diff)) return [];
  const rows: DiffRow[] = [];
  for (const op of diff) {
    if (!op || typeof op !== "object") continue;
    const { op: name, path, value, from } = op as Record<string, unknown>;
    const kind = typeof name === "string" ? OPS[name] : undefined;
    if (!kind || typeof path !== "string") continue;
    const row: DiffRow = { op: kind, path: pointerToPath(path) };
    if (kind !== "removed" && kind !== "moved" && value !== undefined) row.value = show(value);
    if (typeof from === "string") row.from = pointerToPath(from);
    rows.push(row);
  }
  return rows;
}
