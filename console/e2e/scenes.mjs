// The scenes of the console's reading pages and addresses, run by `run.mjs` in its scenario:
// an App's logs followed live, the audit log (and a viewer refused it), and addresses that
// name the organization.
import { appendFileSync } from "node:fs";
import { step } from "./browser.mjs";
import { CONVERGE, heading, signIn, waitForAsync } from "./wait.mjs";

/// On the App's page, Running: its logs followed (a line written on the cluster appears: kwok's
/// containers all show one file; a real node's nginx logs its start), in light and in dark;
/// then the audit log lists the App's create, filtered. Ends on the App's page.
export async function logsAndAudit(admin, { app, suffix, org, admin: adminUser, kwokLog }) {
  await admin.getByRole("link", { name: "Logs", exact: true }).click();
  await heading(admin, `Logs of ${app}`).waitFor();
  await admin.getByTestId("log-state").filter({ hasText: "following" }).waitFor();
  const lines = admin.getByTestId("log-lines");
  if (kwokLog) {
    const marker = `console-e2e ${suffix} GET /orders 200`;
    await waitForAsync(async () => {
      appendFileSync(kwokLog, `${new Date().toISOString()} stdout F ${marker}\n`);
      await lines.filter({ hasText: marker }).waitFor({ timeout: 5_000 });
      return true;
    }, "the written log line in the viewer");
  }
  await lines.filter({ hasText: `${app}-web-` }).filter({ hasText: "/web " }).waitFor({ timeout: CONVERGE });
  await step(admin, "app-logs");
  await admin.emulateMedia({ colorScheme: "dark" });
  await step(admin, "app-logs-dark");
  await admin.getByRole("button", { name: "Stop" }).click();
  await admin.getByTestId("log-state").filter({ hasText: "ended: stopped" }).waitFor();
  await admin.getByRole("navigation", { name: "Breadcrumb" }).getByRole("link", { name: app, exact: true }).click();
  await heading(admin, `App ${app}`).waitFor();
  await step(admin, "app-running-dark");
  await admin.emulateMedia({ colorScheme: "light" });

  await admin.getByRole("link", { name: "Audit", exact: true }).click();
  await heading(admin, `Audit log of ${org}`).waitFor();
  const audit = admin.getByRole("form", { name: "Audit filters" });
  await audit.getByLabel("Actor").fill(adminUser);
  await audit.getByLabel("Outcome").selectOption("succeeded");
  await audit.getByRole("button", { name: "Filter" }).click();
  const creates = admin.getByTestId("audit-row").filter({ has: admin.locator("code", { hasText: /^POST \/api\/v1\/apps$/ }) });
  await creates.filter({ hasText: "succeeded 202" }).first().waitFor();
  if ((await admin.getByTestId("audit-row").filter({ hasText: "refused" }).count()) > 0) throw new Error("the outcome filter let a refused entry through");
  await step(admin, "audit");
  await admin.emulateMedia({ colorScheme: "dark" });
  await step(admin, "audit-dark");
  await admin.emulateMedia({ colorScheme: "light" });
  await admin.getByRole("link", { name: "Apps", exact: true }).click();
  await admin.getByRole("link", { name: app, exact: true }).click();
  await heading(admin, `App ${app}`).waitFor();
}

/// A viewer has no audit link, and its address gets the API's refusal shown as such.
export async function viewerRefusedAudit(view, { console: address, org }) {
  if ((await view.getByRole("link", { name: "Audit", exact: true }).count()) > 0) throw new Error("the viewer is offered the audit log");
  await view.goto(`${address}orgs/${org}/audit`);
  await view.getByRole("alert").waitFor();
  if ((await view.getByTestId("audit-table").count()) > 0) throw new Error("the viewer sees the audit log");
  await step(view, "viewer-audit-refused");
}

/// In a fresh context: a link into another organization than the first opens there after the
/// login; the switcher keeps the section; an old address (no organization) goes to the App in
/// its own organization. Closes the page.
export async function addresses(linked, { console: address, org, otherOrg, admin, password, app, appUrl }) {
  await signIn(linked, `${address}orgs/${otherOrg}/apps`, admin, password, "Apps");
  await linked.getByText("No Apps here.").waitFor();
  if ((await linked.getByLabel("Organization").inputValue()) !== otherOrg) throw new Error("the deep link opened in another organization");
  await step(linked, "deep-link-other-org");
  await linked.getByLabel("Organization").selectOption(org);
  await linked.getByTestId(`app-row-${app}`).waitFor();
  if (!new URL(linked.url()).pathname.endsWith(`/orgs/${org}/apps`)) throw new Error(`the switcher went to ${linked.url()}`);
  await linked.getByLabel("Organization").selectOption(otherOrg);
  await linked.getByText("No Apps here.").waitFor();
  await linked.goto(`${address}apps/${appUrl.split("/").pop()}`);
  await heading(linked, `App ${app}`).waitFor();
  if (!new URL(linked.url()).pathname.startsWith(`/orgs/${org}/apps/`)) throw new Error(`the old address went to ${linked.url()}`);
  await linked.close();
}
