#!/usr/bin/env node
// `npm run bench` / `npm run bench -- --quick` (`--only end-to-end,cost` runs just those parts):
// bundles the TypeScript orchestrator with esbuild, then runs it. See bench/README.md.
import { build } from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outfile = join(here, ".work/main.mjs");
await build({
  entryPoints: [join(here, "main.ts")],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "inline",
  logLevel: "warning",
});
process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));
const { main } = await import(pathToFileURL(outfile).href);
process.exitCode = await main(process.argv.slice(2));
