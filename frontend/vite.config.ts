/// <reference types="vitest/config" />
import { fileURLToPath } from "node:url";

import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The build goes where the dashboard process serves it from (src/butlers/dashboard/static).
const outDir = fileURLToPath(new URL("../src/butlers/dashboard/static", import.meta.url));

export default defineConfig({
  plugins: [react()],
  build: { outDir, emptyOutDir: true, sourcemap: false },
  server: {
    port: 40173,
    // The dashboard `python3 dev.py ui-dev` starts for the dev server (it alone allows
    // this origin).
    proxy: {
      "/api": "http://127.0.0.1:40201",
      "/login": "http://127.0.0.1:40201",
      "/logout": "http://127.0.0.1:40201",
    },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
    restoreMocks: true,
  },
});
