// What bench/console/run measures, against the `dev up` its environment describes:
//
// 1. Live latency, 50 changes: the App is paused and resumed in turn through the API; from
//    the moment of each call, the time until `kubectl get -w` on the management cluster
//    prints the new phase, and the time until the console's app detail page has painted it
//    (a MutationObserver on the heading, then the next animation frame). Both clocks are the
//    same machine's epoch in milliseconds. What the console adds on top of the controllers is
//    the difference: the API server's watch, the event log, the SSE stream, the reducer, React.
// 2. The apps list with 1,000 Apps: a fresh load of /apps (refresh cookie, account, first page
//    of 100 rows) until its rows are painted and the main thread is idle; then each of the
//    10 pages.
import { spawn } from "node:child_process";
import { launch, openPage } from "../../console/e2e/browser.mjs";
import { api, login } from "../../console/e2e/api.mjs";

const E = process.env;
// KUBENEST_BENCH_TINY=1: only check that every step still runs, in seconds (the console's
// browser test does, devenv/tests/console.rs); its figures mean nothing.
const TINY = E.KUBENEST_BENCH_TINY === "1";
const CHANGES = TINY ? 3 : 50;
const APPS = TINY ? 110 : 1000;
const ROUNDS = TINY ? 1 : 5;
const now = () => performance.timeOrigin + performance.now();

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const summary = (values) => ({ p50_ms: Math.round(percentile(values, 50)), p99_ms: Math.round(percentile(values, 99)) });

async function until(check, what, timeout = 120_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/// `kubectl get -w` of one App's phase; each line with the time it arrived.
function watchPhase(namespace, name) {
  const lines = [];
  const child = spawn(E.KUBENEST_KUBECTL, [
    "--kubeconfig", E.KUBENEST_MGMT_KUBECONFIG, "-n", namespace, "get", "apps.kubenest.io", name,
    "-w", "--no-headers", "-o", "custom-columns=PHASE:.status.phase",
  ]);
  let rest = "";
  child.stdout.on("data", (chunk) => {
    const at = now();
    const parts = (rest + chunk.toString()).split("\n");
    rest = parts.pop();
    for (const line of parts) lines.push({ at, phase: line.trim() });
  });
  return { lines, stop: () => child.kill() };
}

async function main() {
  const token = await login(E.KUBENEST_ADMIN_USER, E.KUBENEST_ADMIN_PASSWORD);
  const org = E.KUBENEST_ORG;
  const clusterId = E.KUBENEST_CLUSTER_ID_EAST;
  const suffix = Math.random().toString(36).slice(2, 7);
  const project = await api.post(token, `/api/v1/orgs/${org}/projects`, { name: `bench-${suffix}`, cluster_id: clusterId });
  await until(async () => (await api.get(token, `/api/v1/projects/${project.id}`)).phase === "Ready", "project Ready");
  const app = await api.post(token, "/api/v1/apps", {
    project_id: project.id,
    name: `live-${suffix}`,
    components: [{ name: "web", type: "workload", workload_spec: { image: "nginx:1.27", replicas: 1, port: 8080 } }],
  });
  await until(async () => (await api.get(token, `/api/v1/apps/${app.id}`)).phase === "Running", "App Running");

  const browser = await launch();
  const page = await openPage(browser, E.KUBENEST_ADMIN_USER);
  await page.goto(E.KUBENEST_CONSOLE);
  await page.getByLabel("User name").fill(E.KUBENEST_ADMIN_USER);
  await page.getByLabel("Password").fill(E.KUBENEST_ADMIN_PASSWORD);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "Fleet" }).waitFor();
  await page.goto(`${E.KUBENEST_CONSOLE}apps/${app.id}`);
  await page.locator("h1", { hasText: "Running" }).waitFor();
  await page.getByTestId("connection").filter({ hasText: "live" }).waitFor();

  // The page records when its heading first shows each phase, once painted.
  await page.evaluate(() => {
    window.__painted = {};
    const h1 = () => document.querySelector("main h1")?.textContent ?? "";
    new MutationObserver(() => {
      const text = h1();
      for (const phase of ["Paused", "Running"]) {
        if (text.includes(phase) && !(phase in window.__painted)) {
          requestAnimationFrame(() => {
            window.__painted[phase] ??= performance.timeOrigin + performance.now();
          });
        }
      }
    }).observe(document.querySelector("main"), { subtree: true, childList: true, characterData: true });
  });

  const watch = watchPhase(`org-${org}`, app.name);
  await new Promise((r) => setTimeout(r, 2000));
  const kubectl = [];
  const painted = [];
  for (let i = 0; i < CHANGES; i++) {
    const [action, phase] = i % 2 === 0 ? ["pause", "Paused"] : ["resume", "Running"];
    await page.evaluate(() => (window.__painted = {}));
    const seen = watch.lines.length;
    const t0 = now();
    await api.post(token, `/api/v1/apps/${app.id}/${action}`);
    const line = await until(() => watch.lines.slice(seen).find((l) => l.phase === phase), `kubectl sees ${phase}`);
    const paint = await until(() => page.evaluate((p) => window.__painted[p], phase), `console paints ${phase}`);
    kubectl.push(line.at - t0);
    painted.push(paint - t0);
  }
  watch.stop();
  const live = summary(painted);
  const peer = summary(kubectl);
  console.log(`phase change -> console painted: p50 ${live.p50_ms} ms, p99 ${live.p99_ms} ms (${CHANGES} changes)`);
  console.log(`phase change -> kubectl get -w:  p50 ${peer.p50_ms} ms, p99 ${peer.p99_ms} ms`);

  // 1,000 Apps (the live one among them), ten at a time: a 2-core machine running the whole
  // system must keep its controllers' Lease renewed meanwhile.
  for (let i = 1; i < APPS; i += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, APPS - i) }, (_, j) =>
        api.post(token, "/api/v1/apps", {
          project_id: project.id,
          name: `many-${suffix}-${i + j}`,
          components: [{ name: "web", type: "workload", workload_spec: { image: "nginx:1.27", replicas: 0 } }],
        }),
      ),
    );
  }
  const tti = [];
  for (let round = 0; round < ROUNDS; round++) {
    await page.goto(`${E.KUBENEST_CONSOLE}apps`);
    await page.locator('[data-testid^="app-row-"]').nth(99).waitFor({ timeout: 60_000 });
    tti.push(await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => setTimeout(() => done(performance.now()), 0)))));
  }
  const pages = [];
  for (let p = 1; p < APPS / 100; p++) {
    const t0 = now();
    const first = await page.locator('[data-testid^="app-row-"]').first().getAttribute("data-testid");
    await page.getByRole("button", { name: "Next page" }).click();
    await until(async () => (await page.locator('[data-testid^="app-row-"]').first().getAttribute("data-testid")) !== first, "next page");
    pages.push(now() - t0);
  }
  await browser.close();

  console.log(`apps list with ${APPS} Apps: time to interactive p50 ${Math.round(percentile(tti, 50))} ms; next page p50 ${Math.round(percentile(pages, 50))} ms`);
  console.log(
    JSON.stringify({
      bench: "console",
      changes: CHANGES,
      console_paint: live,
      kubectl_watch: peer,
      paint_over_watch_p50_ms: live.p50_ms - peer.p50_ms,
      apps: APPS,
      apps_list_tti_ms: { p50: Math.round(percentile(tti, 50)), max: Math.round(Math.max(...tti)) },
      apps_list_next_page_ms: summary(pages),
    }),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
