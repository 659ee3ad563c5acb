// The shared set-up of the page tests: a signed-in member of "acme", a stand-in `fetch` that
// answers by path, and a page mounted at its route.
import type { ReactElement } from "react";
import { vi } from "vitest";
import { cleanup, render } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { AccountContext, type Account } from "./account";

export const account: Account = {
  me: {
    username: "ana",
    id: "00000000-0000-0000-0000-000000000001",
    platform_admin: false,
    disabled: false,
    created_at: "2026-01-01T00:00:00Z",
  },
  orgs: [{ name: "acme", display_name: "Acme", role: "member" }],
  org: "acme",
  setOrg: () => undefined,
};

/// A JSON answer of the API.
export function answer(status: number, body: unknown) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

/// An API refusal, as the API answers one: an RFC 9457 problem (`application/problem+json`)
/// with kubenest's `code` and, when one field is at fault, `field`. The shape is written here
/// only.
export function refusal(status: number, code: string, message: string, field?: string) {
  const title = code.charAt(0).toUpperCase() + code.slice(1).replaceAll("_", " ");
  const problem = { type: `tag:kubenest.io,2026:problem:${code}`, title, status, detail: message, code, ...(field ? { field } : {}) };
  return new Response(JSON.stringify(problem), { status, headers: { "Content-Type": "application/problem+json" } });
}

/// A project of "acme" on cluster "east", as the API lists it.
export const project = (id: string, name: string) => ({ id, name, org: "acme", cluster: "east", namespace: name, phase: "Ready", message: "", members: [] });

/// Replaces `fetch` with `handle`; a request it does not answer is a 404 in the API's shape.
export function stubFetch(handle: (url: URL, input: Request) => Promise<Response | undefined> | Response | undefined) {
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: Request) => (await handle(new URL(input.url, "http://localhost"), input)) ?? refusal(404, "not_found", "no")),
  );
}

/// Renders `element` as the page of route `path`, opened at `entry`.
export function mountPage(entry: string, path: string, element: ReactElement) {
  render(
    <AccountContext.Provider value={account}>
      <MemoryRouter initialEntries={[entry]}>
        <Routes>
          <Route path={path} element={element} />
        </Routes>
      </MemoryRouter>
    </AccountContext.Provider>,
  );
}

/// Unmounts the page and restores `fetch` (each test's `afterEach`).
export function unmount() {
  cleanup();
  vi.unstubAllGlobals();
}
