// The audit page against a stand-in fetch: the filters of the address reach the API, the next
// page asks with the answer's `continue`, and a refusal (not an admin) is shown as such.
import { afterEach, describe, expect, it } from "vitest";
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { answer, mountPage, refusal, stubFetch, unmount } from "../testing";
import { Audit } from "./Audit";

const entry = (id: number, action: string) => ({
  id,
  actor: "ana",
  path: "rest",
  action,
  resource_kind: "apps",
  resource_name: "shop",
  outcome: "succeeded",
  status: 201,
  at: "2026-12-01T10:00:00Z",
  details: { image: "nginx:1.27" },
});

afterEach(unmount);

describe("the audit page", () => {
  it("asks with the address's filters and pages with the API's continue", async () => {
    const asked: Record<string, string>[] = [];
    stubFetch((url) => {
      if (url.pathname !== "/api/v1/orgs/acme/audit") return undefined;
      const query = Object.fromEntries(url.searchParams);
      asked.push(query);
      return query.continue ? answer(200, { items: [entry(1, "POST /api/v1/apps")] }) : answer(200, { items: [entry(9, "PATCH /api/v1/apps/{id}")], continue: "a9" });
    });
    mountPage("/orgs/acme/audit?outcome=succeeded&path=nonsense", "/orgs/:org/audit", <Audit />);
    expect((await screen.findByTestId("audit-row")).textContent).toContain("PATCH /api/v1/apps/{id}");
    // A path the API does not know is not sent.
    expect(asked[0]).toEqual({ outcome: "succeeded", limit: "50" });
    fireEvent.click(screen.getByRole("button", { name: "Older" }));
    await waitFor(() => expect(screen.getByTestId("audit-row").textContent).toContain("POST /api/v1/apps"));
    expect(asked.at(-1)).toEqual({ outcome: "succeeded", limit: "50", continue: "a9" });
    expect(screen.getByRole("button", { name: "Older" })).toHaveProperty("disabled", true);
  });

  it("sends the filters of the form", async () => {
    const asked: Record<string, string>[] = [];
    stubFetch((url) => {
      if (url.pathname !== "/api/v1/orgs/acme/audit") return undefined;
      asked.push(Object.fromEntries(url.searchParams));
      return answer(200, { items: [] });
    });
    mountPage("/orgs/acme/audit", "/orgs/:org/audit", <Audit />);
    await screen.findByText("No entries match.");
    fireEvent.change(screen.getByLabelText("Actor"), { target: { value: " bob " } });
    fireEvent.change(screen.getByLabelText("Via"), { target: { value: "kubectl" } });
    fireEvent.click(screen.getByRole("button", { name: "Filter" }));
    await waitFor(() => expect(asked.at(-1)).toEqual({ actor: "bob", path: "kubectl", limit: "50" }));
  });

  it("shows no row of the previous filter while the new one loads", async () => {
    let release: (r: Response) => void = () => undefined;
    stubFetch((url) => {
      if (url.pathname !== "/api/v1/orgs/acme/audit") return undefined;
      if (!url.searchParams.get("outcome")) return answer(200, { items: [{ ...entry(3, "POST /api/v1/apps"), outcome: "refused", status: 422 }] });
      return new Promise<Response>((resolve) => (release = resolve));
    });
    mountPage("/orgs/acme/audit", "/orgs/:org/audit", <Audit />);
    expect((await screen.findByTestId("audit-row")).textContent).toContain("refused");
    fireEvent.change(screen.getByLabelText("Outcome"), { target: { value: "succeeded" } });
    fireEvent.click(screen.getByRole("button", { name: "Filter" }));
    await waitFor(() => expect(screen.getByTestId("audit-table").getAttribute("aria-busy")).toBe("true"));
    expect(screen.queryByTestId("audit-row")).toBeNull();
    release(answer(200, { items: [entry(9, "POST /api/v1/apps")] }));
    expect((await screen.findByTestId("audit-row")).textContent).toContain("succeeded 201");
  });

  it("shows the API's refusal to a user who is not an organization admin", async () => {
    stubFetch((url) => (url.pathname === "/api/v1/orgs/acme/audit" ? refusal(403, "forbidden", "organization admins only") : undefined));
    mountPage("/orgs/acme/audit", "/orgs/:org/audit", <Audit />);
    expect((await screen.findByRole("alert")).textContent).toContain("organization admins only");
    expect(screen.queryByTestId("audit-table")).toBeNull();
  });
});
