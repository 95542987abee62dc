// The browser test (`npm run test:browser`): outside `npm test`, as it needs Debian's chromium (.ci/run installs it).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    name: "browser",
    environment: "node",
    include: ["test/harness/**/*.browser.ts"],
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
