// What every browser scene waits with: the system's convergence time, polling for a condition
// outside the page, a page's heading, and the login.

/// How long the system may take to converge after a change.
export const CONVERGE = 120_000;

/// The page's `h1` containing `text`.
export const heading = (page, text) => page.locator("h1", { hasText: text });

/// Logs in at `address` (a page that asks for the login) and waits for the page it leads to.
export async function signIn(page, address, user, password, landing = "Fleet") {
  await page.goto(address);
  await page.getByRole("heading", { name: "kubenest" }).waitFor();
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Log in" }).click();
  await heading(page, landing).waitFor();
}

export async function waitFor(check, what, timeout = CONVERGE) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (check()) return;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function waitForAsync(check, what, timeout = CONVERGE) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
