#!/usr/bin/env node
// Profiles one end-to-end case inside workerd (bench/dev/profile.ts; bench/README.md, "Profiling a
// case"): bundles it with esbuild into bench/.work/ and runs it.
//
//   node bench/dev/profile.mjs fast-hot                # 8 s of load, profiled
//   node bench/dev/profile.mjs strict-ips --no-profile # workerd CPU per request only
import { build } from "esbuild";
import { mkdir } from "node:fs/promises";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const work = resolve("bench/.work");
await mkdir(work, { recursive: true });
const outfile = resolve(work, "profile.mjs");
await build({ entryPoints: ["bench/dev/profile.ts"], bundle: true, platform: "node", format: "esm", target: "node20", packages: "external", outfile, logLevel: "warning" });

const { main } = await import(pathToFileURL(outfile).href);
try {
  await main(process.argv.slice(2));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
}
