import { describe, expect, it } from "vitest";
import { fromYaml, getPath, normalizeField, setPath, toYaml, type AppDraft } from "./appForm";

const draft: AppDraft = {
  name: "shop",
  project_id: "p1",
  components: [
    { name: "db", type: "addon", addon_spec: { definition: "postgres" } },
    { name: "web", type: "workload", workload_spec: { image: "nginx:1.27", replicas: 2 } },
  ],
};

describe("the App form model", () => {
  it("reads and writes by the API's field paths without changing the original", () => {
    expect(getPath(draft, "components[1].workload_spec.image")).toBe("nginx:1.27");
    const next = setPath(draft, "components[1].workload_spec.image", "nginx:1.28");
    expect(getPath(next, "components[1].workload_spec.image")).toBe("nginx:1.28");
    expect(getPath(draft, "components[1].workload_spec.image")).toBe("nginx:1.27");
    expect(next.components[0]).toBe(draft.components[0]);
  });

  it("makes what is missing on the way, and removes a key set to undefined", () => {
    const next = setPath(draft, "components[1].workload_spec.port", 8080);
    expect(getPath(next, "components[1].workload_spec.port")).toBe(8080);
    expect("port" in (setPath(next, "components[1].workload_spec.port", undefined).components[1]!.workload_spec ?? {})).toBe(false);
  });

  it("normalizes the API's field names", () => {
    expect(normalizeField(".components[0].name")).toBe("components[0].name");
    expect(normalizeField(undefined)).toBe("");
  });

  it("round-trips through YAML", () => {
    const text = toYaml(draft);
    expect(text).toContain("image: nginx:1.27");
    expect(fromYaml(text, "p1")).toEqual(draft);
  });

  it("refuses YAML that is not a mapping", () => {
    expect(() => fromYaml("- a", "p1")).toThrow();
    expect(() => fromYaml("", "p1")).toThrow();
  });
});
