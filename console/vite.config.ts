import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// `npm run dev` proxies the API (KUBENEST_API from .kubenest/dev.env), so the console keeps
// one origin as in production: the refresh cookie is SameSite=Strict.
export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", sourcemap: false, assetsInlineLimit: 0 },
  server: {
    proxy: { "/api": { target: process.env.KUBENEST_API ?? "http://127.0.0.1:8080" } },
  },
  test: { environment: "jsdom", include: ["src/**/*.test.{ts,tsx}"] },
});
