// The signed-in frame against a stand-in fetch: an address without an organization goes to the
// tab's last one, an organization the user is not in is said as such (with no navigation of
// it), and the switcher keeps the section.
import { afterEach, describe, expect, it, vi } from "vitest";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter, Route, Routes, useLocation } from "react-router";
import { answer } from "../testing";
import { Layout } from "./Layout";

const orgs = [
  { name: "acme", display_name: "Acme", role: "member" },
  { name: "beta", display_name: "Beta", role: "admin" },
];
const me = { username: "ana", id: "1", platform_admin: false, disabled: false, created_at: "2026-01-01T00:00:00Z" };

/// The API as the frame uses it; the event stream stays open and silent.
function serve() {
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: Request | string) => {
      const url = new URL(typeof input === "string" ? input : input.url, "http://localhost");
      if (url.pathname === "/api/v1/refresh") return answer(200, { access_token: "t", expires_in: 3600, username: "ana" });
      if (url.pathname === "/api/v1/me") return answer(200, me);
      if (url.pathname === "/api/v1/orgs") return answer(200, orgs);
      if (url.pathname === "/api/v1/events/stream") return new Response(new ReadableStream(), { status: 200 });
      return answer(404, {});
    }),
  );
}

function Where() {
  const location = useLocation();
  return <p data-testid="where">{location.pathname}</p>;
}

function mount(entry: string) {
  render(
    <MemoryRouter initialEntries={[entry]}>
      <Routes>
        <Route element={<Layout />}>
          <Route path="/orgs/:org/*" element={<Where />} />
          <Route path="*" element={null} />
        </Route>
      </Routes>
    </MemoryRouter>,
  );
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  sessionStorage.clear();
});

describe("the signed-in frame", () => {
  it("sends an address without an organization to the tab's last one", async () => {
    serve();
    sessionStorage.setItem("kubenest.org", "beta");
    mount("/apps/42");
    expect((await screen.findByTestId("where")).textContent).toBe("/orgs/beta/apps/42");
  });

  it("sends it to the first organization when the tab's last one is no longer the user's", async () => {
    serve();
    sessionStorage.setItem("kubenest.org", "gone");
    mount("/");
    expect((await screen.findByTestId("where")).textContent).toBe("/orgs/acme");
  });

  it("says so when the address names an organization the user is not in", async () => {
    serve();
    mount("/orgs/zeta/apps");
    expect((await screen.findByRole("alert")).textContent).toContain("not a member of the organization “zeta”");
    expect(screen.queryByTestId("where")).toBeNull();
    expect(screen.queryByRole("navigation", { name: "Main" })).toBeNull();
  });

  it("keeps the section when switching organization, and remembers the organization", async () => {
    serve();
    mount("/orgs/acme/apps/42/logs");
    await screen.findByTestId("where");
    // A member of acme is not offered the audit log; an admin of beta is.
    expect(screen.queryByRole("link", { name: "Audit" })).toBeNull();
    fireEvent.change(screen.getByLabelText("Organization"), { target: { value: "beta" } });
    await waitFor(() => expect(screen.getByTestId("where").textContent).toBe("/orgs/beta/apps"));
    expect(screen.getByRole("link", { name: "Audit" }).getAttribute("href")).toBe("/orgs/beta/audit");
    expect(sessionStorage.getItem("kubenest.org")).toBe("beta");
  });
});
