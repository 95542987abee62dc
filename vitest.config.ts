// Two projects: "workers" runs inside workerd with the real RateLimiter Durable Object and its SQLite
// storage; "harness" runs in Node and drives many isolates of the built Worker through Miniflare.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Two files at a time, not vitest's default of one per core less one (a single file on 2 cores): most files
    // spend their time starting workerd and waiting on real time, so two overlap well.
    maxWorkers: 2,
    projects: [
      {
        plugins: [
          cloudflareTest({
            main: "./test/fixtures/main.ts",
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              durableObjects: {
                FLAKY: { className: "FlakyLimiter", useSQLite: true },
                SLOW: { className: "SlowLimiter", useSQLite: true },
                MARKED: { className: "MarkedLimiter", useSQLite: true },
              },
              // Miniflare's own Analytics Engine binding, under another name so that only the tests that pass it as ANALYTICS use it.
              analyticsEngineDatasets: { ANALYTICS_MINIFLARE: { dataset: "floodgate-test" } },
            },
          }),
        ],
        test: {
          name: "workers",
          // Property tests take 1-2 s here; a shared 2-core machine under load has taken them past vitest's default 5 s.
          testTimeout: 15_000,
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/harness/**"],
          globalSetup: ["./test/setup/global.ts"],
        },
      },
      {
        test: {
          name: "harness",
          environment: "node",
          include: ["test/harness/**/*.test.ts"],
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
    ],
  },
});
