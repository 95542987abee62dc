// How wrangler bundles a module Worker for workerd, shared by the test harness and the bench.
import type { BuildOptions } from "esbuild";

/**
 * One ESM file, `cloudflare:*` left to the runtime, the `workerd` export condition first.
 * floodgate has no npm dependencies, so nothing else matters. Add the entry point and output.
 */
export const WORKER_BUILD = {
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["workerd", "worker", "browser"],
  mainFields: ["module", "main"],
  external: ["cloudflare:*", "node:*"],
  logLevel: "silent",
} satisfies BuildOptions;
