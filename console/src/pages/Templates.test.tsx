// Deploying a template against a stand-in fetch: only the projects its scope includes are
// offered (the API refuses the others), and the slots are sent with their types.
import { afterEach, describe, expect, it } from "vitest";
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { answer, mountPage, project, refusal, stubFetch, unmount } from "../testing";
import { TemplateDeploy } from "./Templates";

function mount() {
  const posted: unknown[] = [];
  stubFetch(async (url, input) => {
    if (url.pathname === "/api/v1/orgs/acme/projects") return answer(200, [project("p1", "shop"), project("p2", "blog")]);
    if (url.pathname === "/api/v1/templates/t1")
      return answer(200, {
        id: "t1",
        name: "web",
        org: "acme",
        scope: "project",
        project: "blog",
        description: "",
        parameters: [
          { name: "image", type: "string", required: true, description: "" },
          { name: "replicas", type: "integer", default: "2", required: false, description: "" },
        ],
        components: [{ name: "web" }],
        valid: true,
        message: "",
      });
    if (url.pathname === "/api/v1/templates/t1/deploy") {
      posted.push(await input.json());
      return refusal(422, "validation_failed", "no such image", "parameters.image");
    }
  });
  mountPage("/templates/t1", "/templates/:id", <TemplateDeploy />);
  return posted;
}

afterEach(unmount);

describe("deploying a template", () => {
  it("offers the projects of its scope and sends typed slots", async () => {
    const posted = mount();
    await screen.findByRole("option", { name: "blog" });
    expect(screen.queryByRole("option", { name: "shop" })).toBeNull();
    fireEvent.change(screen.getByLabelText("App name"), { target: { value: "site" } });
    const image = document.querySelector<HTMLInputElement>('input[name="parameters.image"]')!;
    fireEvent.change(image, { target: { value: "nginx:1.27" } });
    fireEvent.click(screen.getByRole("button", { name: "Deploy" }));
    await waitFor(() => expect(image.getAttribute("aria-invalid")).toBe("true"));
    expect(posted[0]).toEqual({ name: "site", project_id: "p2", parameters: { image: "nginx:1.27", replicas: 2 } });
  });
});
