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

/// An API refusal. The error body's shape is written here only: it carries the `{"error": {…}}`
/// body and the RFC 9457 problem fields both, so page tests stay true while the API moves
/// from one to the other (the client reads whichever it knows).
export function refusal(status: number, code: string, message: string) {
  return new Response(JSON.stringify({ error: { code, message }, type: "about:blank", title: message, status, detail: message, code }), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

/// A project of "acme" on cluster "east", as the API lists it.
export const project = (id: string, name: string) => ({ id, name, org: "acme", cluster: "east", namespace: name, phase: "Ready", message: "", members: [] });

/// Replaces `fetch` with `handle`; a request it does not answer is a 404 in the API's shape.
export function stubFetch(handle: (url: URL, input: Request) => Promise<Response | undefined> | Response | undefined) {
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: Request) => (await handle(new URL(input.url, "http://localhost"), input)) ?? answer(404, { error: { code: "not_found", message: "no" } })),
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
