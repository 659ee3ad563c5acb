// Fails the build when the console's JavaScript grows past its budget (gzipped, as served).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const BUDGET = 300 * 1024;
const dir = new URL("../dist/assets/", import.meta.url).pathname;
let total = 0;
for (const name of readdirSync(dir).filter((n) => n.endsWith(".js"))) {
  const size = gzipSync(readFileSync(join(dir, name))).length;
  total += size;
  console.log(`${name}: ${(size / 1024).toFixed(1)} KB gzipped`);
}
console.log(`JavaScript total: ${(total / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB)`);
if (total > BUDGET) {
  console.error("over the bundle budget");
  process.exit(1);
}
