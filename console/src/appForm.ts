// The App form's model: the body as the API takes it, edited by dotted paths (the same paths
// the API names in its field errors), and its YAML text.
import { parse, stringify } from "yaml";
import type { Component } from "./api/client";

export type AppDraft = { name: string; project_id: string; components: Component[] };

/// The API names fields like `components[1].workload_spec.image` (sometimes with a leading
/// dot); inputs are named the same way without it.
export function normalizeField(field?: string | null): string {
  return (field ?? "").replace(/^\./, "");
}

function parts(path: string): (string | number)[] {
  return path
    .split(/\.|\[(\d+)\]/)
    .filter((p) => p !== undefined && p !== "")
    .map((p) => (/^\d+$/.test(p) ? Number(p) : p));
}

export function getPath(value: unknown, path: string): unknown {
  let at: unknown = value;
  for (const part of parts(path)) {
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string | number, unknown>)[part];
  }
  return at;
}

/// A copy of `value` with `path` set (objects and arrays made on the way); `undefined`
/// removes the key.
export function setPath<T>(value: T, path: string, next: unknown): T {
  const keys = parts(path);
  const copy = (node: unknown, i: number): unknown => {
    const key = keys[i]!;
    const base = (
      Array.isArray(node) ? [...node] : node && typeof node === "object" ? { ...node } : typeof key === "number" ? [] : {}
    ) as Record<string | number, unknown>;
    if (i === keys.length - 1) {
      if (next === undefined && !Array.isArray(base)) delete base[key];
      else base[key] = next;
    } else {
      base[key] = copy(base[key], i + 1);
    }
    return base;
  };
  return copy(value, 0) as T;
}

export function toYaml(draft: AppDraft): string {
  return stringify({ name: draft.name, components: draft.components });
}

/// The draft a YAML text describes, or the parser's error for the editor.
export function fromYaml(text: string, project_id: string): AppDraft {
  const value = parse(text) as Partial<AppDraft> | null;
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error("the YAML must be a mapping with name and components");
  return { name: String(value.name ?? ""), project_id, components: (value.components ?? []) as Component[] };
}

export function newComponent(kind: "workload" | "addon", index: number): Component {
  return kind === "addon"
    ? { name: `addon-${index}`, type: "addon", addon_spec: { definition: "postgres" } }
    : { name: `web-${index}`, type: "workload", workload_spec: { image: "nginx:1.27", replicas: 1, port: 8080, env: [] } };
}
