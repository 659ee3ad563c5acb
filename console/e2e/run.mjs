// The console end to end, in Debian's Chromium against the real system (`devenv/tests/console.rs`
// starts it and sets the environment): log in, register a cluster, make a project and the
// reference App, watch it run live, change its image and read the diff, roll back, see drift
// appear and heal after a kubectl scale behind kubenest's back, pause and resume, lose and get
// back the live stream, delete; a viewer sees no action; another organization's user sees
// nothing of this one. Then members and roles, cluster token rotation, a standalone addon from
// the catalog (changed, rolled back), stack templates (from the App, imported, deployed by filling
// their slots), an App past its deadline raising an alert that is acknowledged, and the same
// pages as the viewer sees them. Also: the App's logs followed live (a line written on the
// cluster appears), in light and dark; the audit log lists the create; a deep link opens in
// the organization it names in a fresh context, an old address is redirected, and the
// organization switcher keeps the section.
import { api, login } from "./api.mjs";
import { ARTIFACTS, clearScreenshots, launch, openPage, step } from "./browser.mjs";
import { kubectl } from "./kube.mjs";
import { addresses, logsAndAudit, viewerRefusedAudit } from "./scenes.mjs";
import { CONVERGE, heading, signIn as signInAt, waitFor, waitForAsync } from "./wait.mjs";
import { startProxy } from "./proxy.mjs";

/// The console as the browser reaches it: through a proxy the scenario can cut.
let CONSOLE = process.env.KUBENEST_CONSOLE;
const ADMIN = process.env.KUBENEST_ADMIN_USER;
const PASSWORD = process.env.KUBENEST_ADMIN_PASSWORD;
const ORG = process.env.KUBENEST_ORG ?? "dev";
const CLUSTER = (process.env.KUBENEST_CLUSTERS ?? "east").split(",")[0];
/// The log file every kwok container of the cluster shows (absent on a real node).
const KWOK_LOG = process.env[`KUBENEST_KWOK_LOG_${CLUSTER.toUpperCase()}`];

const referenceApp = (name) => `name: ${name}
components:
  - name: db
    type: addon
    addon_spec: {definition: postgres}
  - name: web
    type: workload
    workload_spec:
      image: nginx:1.27
      replicas: 2
      port: 8080
      env:
        - name: DATABASE_URL
          export_ref: {component: db, export: dsn}
`;

/// A stack template as `GET /templates/{id}/export` gives it, with two slots.
const webTemplate = {
  apiVersion: "kubenest.io/v1alpha1",
  kind: "StackTemplate",
  spec: {
    description: "A web server",
    scope: "global",
    parameters: [
      { name: "image", type: "string", required: true, description: "The container image" },
      { name: "replicas", type: "integer", default: "2" },
    ],
    components: [{ name: "web", workload: { image: "${image}", replicas: "${replicas}", port: 8080 } }],
  },
};

const signIn = (page, user, password) => signInAt(page, CONSOLE, user, password);

async function confirm(page, label) {
  await page.getByRole("button", { name: label, exact: true }).first().click();
  await page.getByRole("dialog").getByRole("button", { name: `Yes, ${label.toLowerCase()}` }).click();
}


async function main() {
  clearScreenshots();
  const token = await login(ADMIN, PASSWORD);
  const suffix = Math.random().toString(36).slice(2, 7);
  const viewer = `viewer-${suffix}`;
  const outsider = `outsider-${suffix}`;
  const newcomer = `newcomer-${suffix}`;
  const password = `pw-${suffix}-${Math.random().toString(36).slice(2)}`;
  await api.post(token, "/api/v1/users", { username: viewer, password });
  await api.post(token, "/api/v1/users", { username: newcomer, password });
  await api.post(token, "/api/v1/users", { username: outsider, password });
  await api.put(token, `/api/v1/orgs/${ORG}/members`, { user: viewer, role: "viewer" });
  await api.post(token, "/api/v1/orgs", { name: `other-${suffix}`, display_name: "Other", members: [{ user: outsider, role: "admin" }] });

  const app = `shop-${suffix}`;
  const proxy = await startProxy(CONSOLE);
  CONSOLE = proxy.url;
  const browser = await launch();
  const pages = [];
  try {
    // The API reference page beside the OpenAPI document: every operation listed, under a
    // policy that lets only its own scripts run (a violation is a console error, which fails).
    const reference = await openPage(browser, "reference");
    pages.push(reference);
    await reference.goto(new URL("/api/v1/reference", CONSOLE).href);
    await reference.locator(".opblock").nth(50).waitFor({ timeout: 30000 });
    if (reference.errors.length > 0) throw new Error(`errors on the reference page:\n  ${reference.errors.join("\n  ")}`);
    await reference.close();

    const admin = await openPage(browser, ADMIN);
    pages.push(admin);
    // Logging in; the fleet live.
    await admin.goto(CONSOLE);
    await admin.getByRole("button", { name: "Log in" }).waitFor();
    await step(admin, "login");
    await signIn(admin, ADMIN, PASSWORD);
    await admin.getByTestId(`cluster-${CLUSTER}`).filter({ hasText: "connected" }).waitFor({ timeout: CONVERGE });
    await admin.getByTestId("connection").filter({ hasText: "live" }).waitFor();
    await step(admin, "fleet");

    // Registration shows the install command once.
    const extra = `extra-${suffix}`;
    await admin.getByLabel("Name").fill(extra);
    await admin.getByRole("button", { name: "Register" }).click();
    await admin.getByTestId("install-command").filter({ hasText: "helm install kubenest-agent" }).waitFor();
    await step(admin, "cluster-registered");
    await admin.getByRole("button", { name: "Done" }).click();

    // A project on the first cluster.
    await admin.getByRole("link", { name: "Projects" }).click();
    await admin.getByRole("heading", { name: "Projects" }).waitFor();
    const project = `shop-${suffix}`;
    await admin.getByLabel("Name").fill(project);
    await admin.getByLabel("Cluster").selectOption({ label: CLUSTER });
    await admin.getByRole("button", { name: "Create project" }).click();
    await admin.getByTestId(`project-${project}`).waitFor();
    await step(admin, "project-created");
    // Its fences: a CPU quota, isolated; the row shows what it uses of the quota.
    const fences = admin.getByRole("form", { name: "Project fences" });
    await fences.getByLabel("Project").selectOption({ label: project });
    await fences.getByLabel("CPU quota").fill("2");
    await fences.getByRole("button", { name: "Set fences" }).click();
    await admin.getByTestId(`cpu-${project}`).filter({ hasText: "0 / 2" }).waitFor();
    // A quantity the API refuses is shown with its field.
    await fences.getByLabel("CPU quota").fill("lots");
    await fences.getByRole("button", { name: "Set fences" }).click();
    await fences.getByRole("alert").filter({ hasText: "quota.cpu" }).waitFor();
    await step(admin, "project-fenced");

    // The cluster cannot go while it has projects: the API's reason is shown.
    await admin.getByRole("link", { name: "Fleet" }).click();
    await admin.getByRole("link", { name: CLUSTER, exact: true }).click();
    await heading(admin, `Cluster ${CLUSTER}`).waitFor();
    await confirm(admin, "Delete cluster");
    await admin.getByRole("alert").filter({ hasText: "delete its projects first" }).waitFor();
    await step(admin, "cluster-delete-blocked");
    // The registered cluster has none and goes.
    await admin.getByRole("link", { name: "Fleet" }).click();
    await admin.getByRole("link", { name: extra }).click();
    await heading(admin, `Cluster ${extra}`).waitFor();
    // Its token rotated (it has no agent whose session the rotation would cut): the new
    // install command once, and the new version in the facts.
    const version = Number(await admin.getByTestId("token-version").textContent());
    await confirm(admin, "Rotate token");
    await admin.getByTestId("install-command").filter({ hasText: `token version ${version + 1}` }).waitFor();
    await admin.getByTestId("token-version").filter({ hasText: String(version + 1) }).waitFor();
    await step(admin, "cluster-token-rotated");
    await confirm(admin, "Delete cluster");
    await admin.getByRole("heading", { name: "Fleet" }).waitFor();

    // A field error lands on its field.
    await admin.getByRole("link", { name: "Apps" }).click();
    await admin.getByRole("link", { name: "New App" }).click();
    await admin.getByRole("heading", { name: "New App" }).waitFor();
    await admin.getByLabel("Project").selectOption({ label: project });
    await admin.locator('input[name="name"]').fill(app);
    await admin.locator('input[name="components[0].name"]').fill("Bad_Name");
    await admin.getByRole("button", { name: "Create" }).click();
    await admin.locator('input[name="components[0].name"][aria-invalid="true"]').waitFor();
    await step(admin, "app-field-error");

    // The reference App from the YAML editor, Running live.
    await admin.getByRole("tab", { name: "YAML" }).click();
    await admin.getByLabel("App YAML").fill(referenceApp(app));
    await admin.getByRole("button", { name: "Create" }).click();
    await heading(admin, `App ${app}`).waitFor();
    const appUrl = admin.url();
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });
    await admin.getByTestId("wiring").filter({ hasText: "DATABASE_URL ← db export dsn" }).waitFor();
    await admin.getByTestId("timeline").filter({ hasText: "→ Running" }).waitFor();
    await step(admin, "app-running");

    // Its objects on the cluster, as a tree: the web Deployment → ReplicaSet → ready Pods,
    // the Service beside it, the addon's objects; refreshed until the cluster shows them ready.
    const tree = admin.getByTestId("object-tree");
    const readyPod = tree
      .locator('[data-kind="Deployment"]', { hasText: `${app}-web` })
      .locator('[data-kind="ReplicaSet"] [data-kind="Pod"]')
      .filter({ has: admin.locator(".badge.ok") });
    await waitForAsync(async () => {
      if ((await readyPod.count()) >= 2) return true;
      await tree.getByRole("button", { name: "Refresh" }).click();
      return false;
    }, "the web pods ready in the object tree");
    await tree.locator('[data-kind="Service"]', { hasText: `${app}-web` }).first().waitFor();
    await tree.scrollIntoViewIfNeeded();
    await step(admin, "app-objects");

    // Its logs followed, and its create in the audit log.
    await logsAndAudit(admin, { app, suffix, org: ORG, admin: ADMIN, kwokLog: KWOK_LOG });

    // An image change: a new history row, and its diff.
    await admin.getByRole("link", { name: "Edit" }).click();
    await admin.locator('input[name="components[1].workload_spec.image"]').fill("nginx:1.28");
    await admin.getByRole("button", { name: "Save" }).click();
    await heading(admin, `App ${app}`).waitFor();
    const rows = admin.getByTestId("history-row");
    await rows.nth(1).waitFor({ timeout: CONVERGE });
    await rows.first().getByRole("button", { name: "Show diff" }).click();
    await admin.locator(".diff", { hasText: "components[1].workload.image" }).filter({ hasText: "nginx:1.28" }).waitFor();
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });
    await step(admin, "app-image-changed");

    // Roll back to the first deployment.
    await rows.last().getByRole("button", { name: "Roll back" }).click();
    await admin.getByRole("dialog").getByRole("button", { name: "Yes, roll back" }).click();
    await rows.nth(2).waitFor({ timeout: CONVERGE });
    await rows.first().filter({ hasText: "rollback" }).waitFor();
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });
    await waitFor(() => kubectl(CLUSTER, "-n", project, "get", `deployment/${app}-web`, "-o", "jsonpath={.spec.template.spec.containers[0].image}") === "nginx:1.27", "nginx:1.27 on the cluster again");
    await step(admin, "app-rolled-back");

    // Drift: scaled behind kubenest's back, seen live, healed.
    kubectl(CLUSTER, "-n", project, "scale", `deployment/${app}-web`, "--replicas=5");
    await admin.getByTestId("timeline").filter({ hasText: "drift detected" }).filter({ hasText: "spec.replicas" }).waitFor({ timeout: CONVERGE });
    await admin.getByTestId("timeline").filter({ hasText: "drift healed" }).waitFor({ timeout: CONVERGE });
    await step(admin, "app-drift-healed");

    // Pause and resume.
    await confirm(admin, "Pause");
    await heading(admin, "Paused").waitFor({ timeout: CONVERGE });
    await step(admin, "app-paused");
    await confirm(admin, "Resume");
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });

    // The live stream lost and resumed: the indicator says so, and what happened meanwhile
    // arrives (Last-Event-ID).
    admin.networkCut = true;
    proxy.cut();
    await admin.getByTestId("connection").filter({ hasText: "reconnecting" }).waitFor({ timeout: 30_000 });
    await step(admin, "stream-reconnecting");
    const appId = appUrl.split("/").pop();
    await api.post(token, `/api/v1/apps/${appId}/pause`);
    proxy.restore();
    await admin.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 30_000 });
    await heading(admin, "Paused").waitFor({ timeout: CONVERGE });
    admin.networkCut = false;
    await confirm(admin, "Resume");
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });

    // A viewer sees the App and no action.
    const view = await openPage(browser, viewer);
    pages.push(view);
    await signIn(view, viewer, password);
    await view.goto(appUrl);
    await heading(view, `App ${app}`).waitFor();
    for (const name of ["Edit", "Pause", "Delete", "Redeploy", "Roll back"]) {
      if ((await view.getByRole("button", { name }).count()) + (await view.getByRole("link", { name, exact: true }).count()) > 0) {
        throw new Error(`the viewer sees the action ${name}`);
      }
    }
    await view.getByRole("link", { name: "Apps" }).click();
    await view.getByTestId("apps-table").waitFor();
    if ((await view.getByRole("link", { name: "New App" }).count()) > 0) throw new Error("the viewer may create Apps");
    await step(view, "viewer-app-list");
    await viewerRefusedAudit(view, { console: CONSOLE, org: ORG });

    // Another organization's admin sees nothing of this one.
    const other = await openPage(browser, outsider);
    pages.push(other);
    await signIn(other, outsider, password);
    await other.getByText("No clusters registered yet.").waitFor();
    await other.getByRole("link", { name: "Apps" }).click();
    await other.getByText("No Apps here.").waitFor();
    await other.goto(appUrl);
    await other.getByRole("alert").waitFor();
    if ((await other.getByText(`App ${app}`).count()) > 0) throw new Error("the outsider sees the App");
    // Nor its logs, at an address in the outsider's own organization.
    await other.goto(`${CONSOLE}orgs/other-${suffix}/apps/${appId}/logs`);
    await other.getByRole("alert").waitFor();
    if ((await other.getByTestId("log-lines").count()) > 0) throw new Error("the outsider sees the App's logs");
    await step(other, "other-org-sees-nothing");

    // Addresses name the organization (a fresh context: the admin again).
    const linked = await openPage(browser, `${ADMIN}-linked`);
    pages.push(linked);
    await addresses(linked, { console: CONSOLE, org: ORG, otherOrg: `other-${suffix}`, admin: ADMIN, password: PASSWORD, app, appUrl });

    // Members and roles: a user added as a member is listed with that role.
    await admin.bringToFront();
    await admin.getByRole("link", { name: "Members" }).click();
    await heading(admin, `Members of ${ORG}`).waitFor();
    const adding = admin.getByRole("form", { name: "Add a member" });
    await adding.getByLabel("User").fill(newcomer);
    await adding.getByLabel("Role").selectOption("member");
    await adding.getByRole("button", { name: "Add member" }).click();
    await waitForAsync(async () => (await admin.getByLabel(`Role of ${newcomer}`).inputValue()) === "member", `${newcomer} listed as a member`);
    await step(admin, "member-added");

    // A standalone postgres from the catalog, listed with its first revision as the stream
    // reports it (the page is not reloaded).
    await admin.getByRole("link", { name: "Addons" }).click();
    await admin.getByRole("heading", { name: "Addons" }).waitFor();
    const addon = `pg-${suffix}`;
    const installing = admin.getByRole("form", { name: "Install an addon" });
    await installing.getByLabel("Name").fill(addon);
    await installing.getByLabel("Project").selectOption({ label: project });
    await installing.getByLabel("Addon").selectOption("postgres");
    await installing.getByRole("button", { name: "Install" }).click();
    const addonRow = admin.getByTestId(`addon-row-${addon}`);
    await addonRow.waitFor();
    await addonRow.locator("td").last().filter({ hasText: /^1$/ }).waitFor({ timeout: CONVERGE });
    await step(admin, "addon-installed");
    await addonRow.getByRole("link", { name: addon }).click();
    await heading(admin, `Addon ${addon}`).waitFor();
    const revisions = admin.getByTestId("revision-row");
    await revisions.filter({ hasText: "install" }).waitFor();
    await step(admin, "addon-revisions");
    // New values are revision 2; rolling back to revision 1 is revision 3, a rollback.
    const changing = admin.getByRole("form", { name: "Change the addon" });
    await changing.getByLabel("Values (JSON)").fill(JSON.stringify({ database: "orders" }));
    await changing.getByRole("button", { name: "Change" }).click();
    await revisions.filter({ hasText: "values" }).filter({ hasText: "orders" }).waitFor();
    await revisions.last().getByRole("button", { name: "Roll back" }).click();
    await admin.getByRole("dialog").getByRole("button", { name: "Yes, roll back" }).click();
    await revisions.first().filter({ hasText: "rollback" }).waitFor({ timeout: CONVERGE });
    await step(admin, "addon-rolled-back");

    // Stack templates: one saved from the running App; one imported with slots and deployed
    // by filling them, which makes a new App.
    await admin.getByRole("link", { name: "Templates" }).click();
    await admin.getByRole("heading", { name: "Stack templates" }).waitFor();
    const saved = `shop-tpl-${suffix}`;
    const fromApp = admin.getByRole("form", { name: "New template from an App" });
    await fromApp.getByLabel("Template name").fill(saved);
    await fromApp.getByLabel("App").selectOption({ label: `${app} (${project})` });
    await fromApp.getByRole("button", { name: "Save as template" }).click();
    await admin.getByTestId(`template-row-${saved}`).filter({ hasText: "yes" }).waitFor();
    await step(admin, "template-from-app");
    const web = `web-${suffix}`;
    const importing = admin.getByRole("form", { name: "Import a template" });
    await importing.getByLabel("Template name").fill(web);
    await importing.getByLabel("Project").selectOption({ label: project });
    await importing.getByLabel("Exported template (JSON)").fill(JSON.stringify(webTemplate, null, 2));
    await importing.getByRole("button", { name: "Import" }).click();
    await admin.getByTestId(`template-row-${web}`).filter({ hasText: "A web server" }).filter({ hasText: "image, replicas" }).waitFor();
    await step(admin, "template-imported");
    await admin.getByRole("link", { name: web, exact: true }).click();
    await heading(admin, `Template ${web}`).waitFor();
    const deploying = admin.getByRole("form", { name: "Deploy" });
    const fromTemplate = `site-${suffix}`;
    await deploying.getByLabel("App name").fill(fromTemplate);
    await deploying.getByLabel("Project").selectOption({ label: project });
    await deploying.locator('input[name="parameters.image"]').fill("nginx:1.27");
    await deploying.locator('input[name="parameters.replicas"]').fill("1");
    await step(admin, "template-deploy-form");
    await deploying.getByRole("button", { name: "Deploy" }).click();
    await heading(admin, `App ${fromTemplate}`).waitFor();
    await heading(admin, "Running").waitFor({ timeout: CONVERGE });
    await waitFor(() => kubectl(CLUSTER, "-n", project, "get", `deployment/${fromTemplate}-web`, "-o", "jsonpath={.spec.template.spec.containers[0].image}") === "nginx:1.27", `${fromTemplate} on the cluster`);
    await step(admin, "template-deployed");

    // An alert: the template's App changed to an image whose pods never become Ready, with a
    // short deadline, opens a progress-deadline alert; the fleet page, open before it, shows it
    // live from the stream, the alerts page lists it, and a member acknowledges it.
    const failingId = admin.url().split("/").pop();
    const failing = await api.get(token, `/api/v1/apps/${failingId}`);
    const components = failing.components.map((c) => (c.name === "web" ? { ...c, workload_spec: { ...c.workload_spec, image: "nginx:never-ready" } } : c));
    await api.patch(token, `/api/v1/apps/${failingId}`, { components, progress_deadline_seconds: 10 });
    await admin.getByRole("link", { name: "Fleet" }).click();
    let seen;
    await waitForAsync(async () => {
      const open = await api.get(token, `/api/v1/orgs/${ORG}/alerts?state=open`);
      seen = await api.get(token, `/api/v1/apps/${failingId}`);
      return open.some((a) => a.subject_id === failingId);
    }, `an open alert for ${fromTemplate}`).catch((e) => {
      throw new Error(`${e.message}; the App: ${JSON.stringify({ phase: seen?.phase, conditions: seen?.conditions, sync: seen?.sync })}`);
    });
    await admin.getByTestId("open-alerts").filter({ hasText: fromTemplate }).waitFor({ timeout: CONVERGE });
    await step(admin, "fleet-open-alert");
    await admin.getByRole("link", { name: "Alerts" }).click();
    const alertRow = admin.getByTestId(`alert-${fromTemplate}`);
    await alertRow.filter({ hasText: "progress deadline exceeded" }).filter({ hasText: "open" }).waitFor();
    await alertRow.getByRole("button", { name: "Acknowledge" }).click();
    await alertRow.filter({ hasText: "acknowledged by admin" }).waitFor();
    await step(admin, "alert-acknowledged");

    // The viewer sees these pages without their actions.
    await view.bringToFront();
    for (const [link, title, row, form] of [
      ["Members", `Members of ${ORG}`, `member-${newcomer}`, "Add a member"],
      ["Addons", "Addons", `addon-row-${addon}`, "Install an addon"],
      ["Templates", "Stack templates", `template-row-${web}`, "Import a template"],
    ]) {
      await view.getByRole("link", { name: link, exact: true }).click();
      await heading(view, title).waitFor();
      await view.getByTestId(row).waitFor();
      if ((await view.getByRole("form", { name: form }).count()) > 0) throw new Error(`the viewer sees the form ${form}`);
      await step(view, `viewer-${link.toLowerCase()}`);
    }
    await view.getByRole("link", { name: "Alerts", exact: true }).click();
    await view.getByTestId(`alert-${fromTemplate}`).waitFor();
    if ((await view.getByRole("button", { name: "Acknowledge" }).count()) > 0) throw new Error("the viewer may acknowledge alerts");
    await step(view, "viewer-alerts");

    // Delete.
    await admin.bringToFront();
    await admin.goto(appUrl);
    await heading(admin, `App ${app}`).waitFor();
    await confirm(admin, "Delete");
    await admin.getByRole("heading", { name: "Apps" }).waitFor();
    await admin.getByTestId(`app-row-${app}`).waitFor({ state: "detached", timeout: CONVERGE });
    await step(admin, "app-deleted");
    console.log("console e2e: every step passed");
  } catch (error) {
    // What each user's page showed when the scenario failed.
    for (const page of pages) await page.screenshot({ path: `${ARTIFACTS}/failed-${page.user}.png`, fullPage: true }).catch(() => undefined);
    throw error;
  } finally {
    await browser.close();
    proxy.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
