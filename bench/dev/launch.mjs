// Bundles one of the bench's TypeScript entries for Node with esbuild (npm packages stay imports,
// resolved from node_modules) into bench/.work/, and imports it: the build step behind every
// bench command (npm run bench, bench/dev/run-part.mjs, bench/dev/profile.mjs).
import { build } from "esbuild";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const BENCH = join(dirname(fileURLToPath(import.meta.url)), "..");

/** `entry` relative to the repository root, e.g. "bench/main.ts"; resolves to the bundled module. */
export async function launch(entry) {
  const outfile = join(BENCH, ".work", `${basename(entry, ".ts")}.mjs`);
  await build({
    entryPoints: [resolve(BENCH, "..", entry)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "inline",
    logLevel: "warning",
  });
  return import(pathToFileURL(outfile).href);
}
