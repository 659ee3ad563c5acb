// The alerts page against a stand-in fetch: the state filter reaches the API, and a member's
// acknowledgement is posted for the alert it was clicked on.
import { afterEach, describe, expect, it } from "vitest";
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { answer, mountPage, stubFetch, unmount } from "../testing";
import { Alerts } from "./Alerts";

const alert = {
  id: "7",
  org: "acme",
  kind: "progress_deadline_exceeded",
  severity: "warning",
  state: "open",
  subject_kind: "app",
  subject_id: "a1",
  subject_name: "shop",
  message: "revision r2 was not running within 10s",
  opened_at: "2026-12-01T10:00:00Z",
};

afterEach(unmount);

describe("the alerts page", () => {
  it("lists what the API answers for the state and acknowledges one", async () => {
    const asked: string[] = [];
    const acked: string[] = [];
    stubFetch((url, input) => {
      if (url.pathname === "/api/v1/orgs/acme/alerts") {
        asked.push(url.searchParams.get("state") ?? "");
        return answer(200, [acked.length ? { ...alert, state: "acknowledged", acknowledged_by: "ana" } : alert]);
      }
      if (url.pathname === "/api/v1/orgs/acme/alerts/7/ack" && input.method === "POST") {
        acked.push("7");
        return answer(200, { ...alert, state: "acknowledged", acknowledged_by: "ana" });
      }
    });
    mountPage("/alerts?state=open", "/alerts", <Alerts />);
    const row = await screen.findByTestId("alert-shop");
    expect(asked).toContain("open");
    expect(row.textContent).toContain("progress deadline exceeded");
    fireEvent.click(screen.getByRole("button", { name: "Acknowledge" }));
    await waitFor(() => expect(screen.getByTestId("alert-shop").textContent).toContain("acknowledged by ana"));
    expect(acked).toEqual(["7"]);
    expect(screen.queryByRole("button", { name: "Acknowledge" })).toBeNull();
  });

  it("links a deletion's alert to the addon it is about", async () => {
    const deletion = {
      ...alert,
      id: "8",
      kind: "deletion_deadline_exceeded",
      subject_kind: "addon",
      subject_id: "d1",
      subject_name: "shop-db",
      message: "the deletion did not finish within 15s: StatefulSet/shop-db (finalizers: example.test/hold)",
    };
    stubFetch((url) => {
      if (url.pathname === "/api/v1/orgs/acme/alerts") return answer(200, [deletion]);
    });
    mountPage("/alerts", "/alerts", <Alerts />);
    const row = await screen.findByTestId("alert-shop-db");
    expect(row.textContent).toContain("deletion deadline exceeded");
    expect(row.textContent).toContain("example.test/hold");
    const link = screen.getByRole("link", { name: "Addon shop-db" });
    expect(link.getAttribute("href")).toBe("/orgs/acme/addons/d1");
  });
});
