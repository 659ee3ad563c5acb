// The log viewer against a stand-in fetch whose log answer is a real stream: lines arrive as
// they are written, the container picker filters them, Stop ends the request, and a tail the
// API would refuse is refused at the form without a request.
import { afterEach, describe, expect, it } from "vitest";
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { answer, mountPage, refusal, stubFetch, unmount } from "../testing";
import { AppLogs } from "./AppLogs";

const app = { id: "a1", name: "shop", org: "acme", components: [{ name: "web", type: "workload" }, { name: "db", type: "addon" }] };
const log = (container: string, line: string) => `event: log\ndata: ${JSON.stringify({ timestamp: "2026-12-01T10:00:00Z", pod: "shop-web-1", container, line })}\n\n`;

afterEach(unmount);

/// A follow stream the test writes to; it stays open until the reader leaves.
function stream() {
  let push: (text: string) => void = () => undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      push = (text) => controller.enqueue(new TextEncoder().encode(text));
    },
  });
  return { body, push: (text: string) => push(text) };
}

describe("the log viewer", () => {
  it("follows the default component's lines, filters by container and stops", async () => {
    const requests: Request[] = [];
    const follow = stream();
    stubFetch((url, input) => {
      if (url.pathname === "/api/v1/apps/a1") return answer(200, app);
      if (url.pathname === "/api/v1/apps/a1/logs") {
        requests.push(input);
        return new Response(follow.body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
      }
    });
    mountPage("/orgs/acme/apps/a1/logs", "/orgs/:org/apps/:id/logs", <AppLogs />);
    await waitFor(() => expect(requests.length).toBeGreaterThan(0));
    const asked = new URL(requests.at(-1)!.url);
    expect(Object.fromEntries(asked.searchParams)).toEqual({ component: "web", follow: "true", tail: "200" });
    expect(requests.at(-1)!.headers.get("Accept")).toBe("text/event-stream");
    follow.push(log("web", "GET / 200") + ":heartbeat\n\n" + log("proxy", "upstream ok"));
    const lines = await screen.findByTestId("log-lines");
    await waitFor(() => expect(lines.textContent).toContain("upstream ok"));
    expect(lines.textContent).toContain("shop-web-1/web GET / 200");

    expect(lines.textContent).not.toContain("2026-12-01T10:00:00Z");
    fireEvent.click(screen.getByLabelText("Timestamps"));
    expect(lines.textContent).toContain("2026-12-01T10:00:00Z shop-web-1/web GET / 200");

    fireEvent.change(screen.getByLabelText("Container"), { target: { value: "proxy" } });
    expect(lines.textContent).not.toContain("GET / 200");
    expect(lines.textContent).toContain("upstream ok");

    fireEvent.click(screen.getByRole("button", { name: "Stop" }));
    expect(requests.at(-1)!.signal.aborted).toBe(true);
    expect(screen.getByTestId("log-state").textContent).toContain("ended: stopped");
  });

  it("says why the stream ended", async () => {
    stubFetch((url) => {
      if (url.pathname === "/api/v1/apps/a1") return answer(200, app);
      if (url.pathname === "/api/v1/apps/a1/logs") {
        return new Response(log("web", "last words") + 'event: end\ndata: {"reason":"eof","message":"the pods\' logs ended"}\n\n', { status: 200 });
      }
    });
    mountPage("/orgs/acme/apps/a1/logs", "/orgs/:org/apps/:id/logs", <AppLogs />);
    await waitFor(() => expect(screen.getByTestId("log-state").textContent).toContain("ended: every container's log ended: the pods' logs ended"));
    expect(screen.getByTestId("log-lines").textContent).toContain("last words");
  });

  it("refuses a tail out of range at the form, naming it, without asking the API", async () => {
    let asked = 0;
    stubFetch((url) => {
      if (url.pathname === "/api/v1/apps/a1") return answer(200, app);
      if (url.pathname === "/api/v1/apps/a1/logs") {
        asked += 1;
        return new Response("", { status: 200 });
      }
    });
    mountPage("/orgs/acme/apps/a1/logs", "/orgs/:org/apps/:id/logs", <AppLogs />);
    await waitFor(() => expect(asked).toBeGreaterThan(0));
    const before = asked;
    const tail = screen.getByLabelText("Tail");
    fireEvent.change(tail, { target: { value: "0" } });
    fireEvent.click(screen.getByRole("button", { name: /Show logs|Restart/ }));
    expect((await screen.findByRole("alert")).textContent).toContain("tail:");
    expect(tail.getAttribute("aria-invalid")).toBe("true");
    expect(asked).toBe(before);
  });

  it("shows the API's refusal (an App not deployed yet)", async () => {
    stubFetch((url) => {
      if (url.pathname === "/api/v1/apps/a1") return answer(200, app);
      if (url.pathname === "/api/v1/apps/a1/logs") return refusal(409, "not_deployed", "the App has not been deployed to its cluster yet");
    });
    mountPage("/orgs/acme/apps/a1/logs", "/orgs/:org/apps/:id/logs", <AppLogs />);
    expect((await screen.findByRole("alert")).textContent).toContain("not been deployed");
  });

  it("asks for no logs of an App the reader may not see", async () => {
    let asked = 0;
    stubFetch((url) => {
      if (url.pathname === "/api/v1/apps/a1") return refusal(404, "not_found", "no App a1");
      if (url.pathname === "/api/v1/apps/a1/logs") asked += 1;
    });
    mountPage("/orgs/acme/apps/a1/logs", "/orgs/:org/apps/:id/logs", <AppLogs />);
    expect((await screen.findByRole("alert")).textContent).toContain("no App a1");
    expect(screen.queryByTestId("log-lines")).toBeNull();
    expect(asked).toBe(0);
  });
});
