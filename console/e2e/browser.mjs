// Debian's Chromium driven by playwright-core, with what every browser test checks: no
// console error or page error, axe-core on every page, a screenshot of every step.
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export const ARTIFACTS = process.env.KUBENEST_ARTIFACTS ?? new URL("../test-results/", import.meta.url).pathname;
mkdirSync(ARTIFACTS, { recursive: true });

/// Removes an earlier run's step screenshots (their step numbers differ), so the folder holds
/// this run's only.
export function clearScreenshots() {
  for (const name of readdirSync(ARTIFACTS)) {
    if (/^(\d\d-|failed-).*\.png$/.test(name)) rmSync(join(ARTIFACTS, name));
  }
}

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/// Answers the console handles itself; Chromium still logs each as a console error.
/// 401: a refresh without a session; 403: a page the user's role may not read (the audit log);
/// 404: an object the user may not see; 409: a refused deletion; 422: a field error.
const HANDLED = /Failed to load resource: the server responded with a status of (401|403|404|409|422)/;
/// What Chromium logs while the scenario has cut the network (`page.networkCut`).
const CUT = /Failed to load resource: net::ERR_/;

/// Chromium with a fresh user-data-dir (playwright-core makes one per launch); each user of
/// the scenario gets its own context (own cookies) in it.
export async function launch() {
  return chromium.launch({
    executablePath: process.env.KUBENEST_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: FLAGS,
  });
}

/// A page in a fresh context (its own cookies: one user), watched for errors; always in the
/// light scheme unless a step asks for dark (`page.emulateMedia`).
export async function openPage(browser, name) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: "light" });
  const page = await context.newPage();
  const errors = [];
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    if (HANDLED.test(message.text()) || (page.networkCut && CUT.test(message.text()))) {
      console.log(`[${name}] handled: ${message.text()}`);
      return;
    }
    errors.push(`console.error: ${message.text()}`);
  });
  page.on("pageerror", (error) => errors.push(`page error: ${error.message}`));
  page.errors = errors;
  page.user = name;
  return page;
}

/// Fails on any axe-core violation of the page as it is now.
export async function axe(page, label) {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`);
  });
  if (result.length > 0) throw new Error(`axe on ${label}:\n  ${result.join("\n  ")}`);
}

let shot = 0;
/// A numbered screenshot of the step, and the page's accessibility checked.
export async function step(page, label) {
  await axe(page, label);
  shot += 1;
  const file = join(ARTIFACTS, `${String(shot).padStart(2, "0")}-${label}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`step ${shot} (${page.user}): ${label} -> ${file}`);
  if (page.errors.length > 0) throw new Error(`errors in the browser:\n  ${page.errors.join("\n  ")}`);
}
