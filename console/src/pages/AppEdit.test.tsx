// The App form against a stand-in fetch: the API's field error lands on the field it names,
// and on the YAML editor when the form has no such input.
import { afterEach, describe, expect, it, vi } from "vitest";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { AccountContext, type Account } from "../account";
import { AppEdit } from "./AppEdit";

const account: Account = {
  me: { username: "ana", platform_admin: false, created_at: "2026-01-01T00:00:00Z" },
  orgs: [{ name: "acme", display_name: "Acme", role: "member" }],
  org: "acme",
  setOrg: () => undefined,
};

function answer(status: number, body: unknown) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

function mount(error: { field: string; message: string }) {
  const posted: unknown[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: Request) => {
      const url = new URL(input.url, "http://localhost");
      if (url.pathname === "/api/v1/orgs/acme/projects") return answer(200, [{ id: "p1", name: "shop", org: "acme", cluster: "east", namespace: "shop", phase: "Ready", message: "", members: [] }]);
      if (url.pathname === "/api/v1/apps" && input.method === "POST") {
        posted.push(await input.json());
        return answer(422, { error: { code: "validation_failed", ...error } });
      }
      return answer(404, { error: { code: "not_found", message: "no" } });
    }),
  );
  render(
    <AccountContext.Provider value={account}>
      <MemoryRouter initialEntries={["/apps/new"]}>
        <Routes>
          <Route path="/apps/new" element={<AppEdit />} />
        </Routes>
      </MemoryRouter>
    </AccountContext.Provider>,
  );
  return posted;
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the App form", () => {
  it("shows the API's error on the field it names", async () => {
    const posted = mount({ field: "components[0].name", message: "not a DNS label" });
    const name = await screen.findByDisplayValue("web-1");
    fireEvent.change(name, { target: { value: "Bad_Name" } });
    fireEvent.change(document.querySelector('input[name="name"]')!, { target: { value: "shop" } });
    fireEvent.click(screen.getByRole("button", { name: "Create" }));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(screen.getByRole("alert").textContent).toBe("not a DNS label");
    expect(posted[0]).toMatchObject({ name: "shop", project_id: "p1", components: [{ name: "Bad_Name", type: "workload" }] });
  });

  it("shows an error about a field the form has no input for above the submit button", async () => {
    mount({ field: "components[0].workload_spec.env[0].export_ref", message: "no such export" });
    await screen.findByDisplayValue("web-1");
    fireEvent.click(screen.getByRole("button", { name: "Create" }));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toBe("components[0].workload_spec.env[0].export_ref: no such export");
  });
});
