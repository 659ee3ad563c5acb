// The Apps of a project named in the address: asked for by the project's id once it is known
// (never the whole organization's list first), and an unknown name is said as such.
import { afterEach, describe, expect, it } from "vitest";
import { screen, waitFor } from "@testing-library/react";
import { answer, mountPage, project, stubFetch, unmount } from "../testing";
import { Apps } from "./Apps";

afterEach(unmount);

function serve(asked: URLSearchParams[]) {
  stubFetch((url) => {
    if (url.pathname === "/api/v1/orgs/acme/projects") return answer(200, [project("p1", "shop"), project("p2", "blog")]);
    if (url.pathname === "/api/v1/orgs/acme/clusters") return answer(200, []);
    if (url.pathname === "/api/v1/apps") {
      asked.push(url.searchParams);
      return answer(200, { items: [] });
    }
  });
}

describe("the Apps of a project in the address", () => {
  it("asks for the named project's Apps only", async () => {
    const asked: URLSearchParams[] = [];
    serve(asked);
    mountPage("/orgs/acme/projects/blog/apps", "/orgs/:org/projects/:project/apps", <Apps />);
    await screen.findByText("No Apps here.");
    await waitFor(() => expect(asked.length).toBeGreaterThan(0));
    expect(asked.map((q) => q.get("project_id"))).toEqual(asked.map(() => "p2"));
    expect(screen.getByRole("heading").textContent).toBe("Apps of project blog");
    expect((screen.getByLabelText("Project") as HTMLSelectElement).value).toBe("p2");
  });

  it("says when the organization has no such project", async () => {
    const asked: URLSearchParams[] = [];
    serve(asked);
    mountPage("/orgs/acme/projects/nope/apps", "/orgs/:org/projects/:project/apps", <Apps />);
    expect((await screen.findByRole("alert")).textContent).toContain("acme has no project nope");
    expect(asked).toEqual([]);
  });
});
