import { describe, expect, it } from "vitest";
import { render, screen } from "@testing-library/react";
import { diffRows, pointerToPath } from "./diff";
import { DiffTable } from "./components/History";

describe("deployment diffs", () => {
  it("names fields as the API does", () => {
    expect(pointerToPath("/components/1/workload_spec/image")).toBe("components[1].workload_spec.image");
    expect(pointerToPath("/a~1b/c~0d")).toBe("a/b.c~d");
    expect(pointerToPath("")).toBe("(whole spec)");
  });

  it("turns a JSON Patch into rows", () => {
    const rows = diffRows([
      { op: "replace", path: "/components/1/workload_spec/image", value: "nginx:1.28" },
      { op: "add", path: "/components/1/workload_spec/env/0", value: { name: "A", value: "1" } },
      { op: "remove", path: "/components/2" },
      { op: "test", path: "/x", value: 1 },
      { op: "move", from: "/a", path: "/b" },
    ]);
    expect(rows).toEqual([
      { op: "changed", path: "components[1].workload_spec.image", value: "nginx:1.28" },
      { op: "added", path: "components[1].workload_spec.env[0]", value: '{"name":"A","value":"1"}' },
      { op: "removed", path: "components[2]" },
      { op: "moved", path: "b", from: "a" },
    ]);
  });

  it("shows nothing for what is not a patch", () => {
    expect(diffRows(null)).toEqual([]);
    expect(diffRows({ op: "add" })).toEqual([]);
  });

  it("renders the rows, or says there was no change", () => {
    const { unmount } = render(<DiffTable diff={[{ op: "replace", path: "/components/0/workload_spec/image", value: "nginx:1.28" }]} />);
    expect(screen.getByText("components[0].workload_spec.image")).toBeTruthy();
    expect(screen.getByText("nginx:1.28")).toBeTruthy();
    unmount();
    render(<DiffTable diff={[]} />);
    expect(screen.getByText("No change to the spec.")).toBeTruthy();
  });
});
