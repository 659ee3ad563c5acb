// The App form against a stand-in fetch: the API's field error lands on the field it names,
// and on the YAML editor when the form has no such input.
import { afterEach, describe, expect, it } from "vitest";
import { fireEvent, screen, waitFor } from "@testing-library/react";
import { answer, mountPage, project, stubFetch, unmount } from "../testing";
import { AppEdit } from "./AppEdit";

function mount(error: { field: string; detail: string }) {
  const posted: unknown[] = [];
  stubFetch(async (url, input) => {
    if (url.pathname === "/api/v1/orgs/acme/projects") return answer(200, [project("p1", "shop")]);
    if (url.pathname === "/api/v1/apps" && input.method === "POST") {
      posted.push(await input.json());
      return answer(422, { type: "tag:kubenest.io,2026:problem:validation_failed", title: "Validation failed", status: 422, code: "validation_failed", ...error });
    }
  });
  mountPage("/apps/new", "/apps/new", <AppEdit />);
  return posted;
}

afterEach(unmount);

describe("the App form", () => {
  it("shows the API's error on the field it names", async () => {
    const posted = mount({ field: "components[0].name", detail: "not a DNS label" });
    const name = await screen.findByDisplayValue("web-1");
    fireEvent.change(name, { target: { value: "Bad_Name" } });
    fireEvent.change(document.querySelector('input[name="name"]')!, { target: { value: "shop" } });
    fireEvent.click(screen.getByRole("button", { name: "Create" }));
    await waitFor(() => expect(name.getAttribute("aria-invalid")).toBe("true"));
    expect(screen.getByRole("alert").textContent).toBe("not a DNS label");
    expect(posted[0]).toMatchObject({ name: "shop", project_id: "p1", components: [{ name: "Bad_Name", type: "workload" }] });
  });

  it("shows an error about a field the form has no input for above the submit button", async () => {
    mount({ field: "components[0].workload_spec.env[0].export_ref", detail: "no such export" });
    await screen.findByDisplayValue("web-1");
    fireEvent.click(screen.getByRole("button", { name: "Create" }));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toBe("components[0].workload_spec.env[0].export_ref: no such export");
  });
});
