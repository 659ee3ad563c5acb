import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";
import { readFileSync } from "node:fs";
import { Agent } from "node:https";

// `npm run dev` proxies the API (KUBENEST_API from .kubenest/dev.env), so the console keeps
// one origin as in production: the refresh cookie is SameSite=Strict. `make dev` serves the API
// over https with a certificate of its own (KUBENEST_CA_FILE), which the proxy trusts.
const ca = process.env.KUBENEST_CA_FILE;
export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", sourcemap: false, assetsInlineLimit: 0 },
  server: {
    proxy: {
      "/api": {
        target: process.env.KUBENEST_API ?? "http://127.0.0.1:8080",
        ...(ca ? { agent: new Agent({ ca: readFileSync(ca) }) } : {}),
      },
    },
  },
  test: { environment: "jsdom", include: ["src/**/*.test.{ts,tsx}"] },
});
