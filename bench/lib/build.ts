/** Bundles with esbuild: bench code for Node (child processes) and floodgate's Worker for workerd. */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { build } from "esbuild";
import { WORKER_BUILD } from "../../test/harness/worker-build";
import { ROOT, WORK } from "./paths";

/**
 * Bundles a TypeScript entry for Node into `bench/.work/<name>.mjs` and returns that path. npm
 * packages stay imports (resolved from node_modules at run time), so Miniflare, autocannon and
 * ioredis load as installed.
 */
export async function bundleForNode(entry: string, name: string): Promise<string> {
  const outfile = join(WORK, `${name}.mjs`);
  await mkdir(WORK, { recursive: true });
  await build({
    entryPoints: [join(ROOT, entry)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "inline",
    logLevel: "silent",
  });
  return outfile;
}

/** The child-process entry (origin, Node proxy, autocannon), built once per process. */
let child: Promise<string> | undefined;
export function childScript(): Promise<string> {
  child ??= bundleForNode("bench/lib/child.ts", "child").catch((error: unknown) => {
    child = undefined;
    throw error;
  });
  return child;
}

/** Where {@link bundleFloodgate} writes the Worker; its source map is beside it, at `.map`. */
export const FLOODGATE_BUNDLE = join(WORK, "worker/floodgate.mjs");

/**
 * floodgate's Worker (src/index.ts) as one ES module, bundled as wrangler does for workerd:
 * `cloudflare:*` left to the runtime, the `workerd` export condition first. The source map is
 * external (the bundle does not point to it, so workerd never reads it) and lets a profile of the
 * bundle be read in terms of src/ (bench/dev/profile.ts).
 */
export async function bundleFloodgate(): Promise<string> {
  await build({ ...WORKER_BUILD, entryPoints: [join(ROOT, "src/index.ts")], outfile: FLOODGATE_BUNDLE, sourcemap: "external" });
  return FLOODGATE_BUNDLE;
}

/** The deployment's compatibility date and flags, from wrangler.toml's top level. */
export async function compatibility(): Promise<{ compatibilityDate: string; compatibilityFlags: string[] }> {
  const toml = await readFile(join(ROOT, "wrangler.toml"), "utf8");
  const topLevel = toml.split(/^\s*\[/m)[0] ?? "";
  const date = /^\s*compatibility_date\s*=\s*"([^"]+)"/m.exec(topLevel)?.[1];
  if (!date) throw new Error("wrangler.toml has no top-level compatibility_date");
  const flags = /^\s*compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(topLevel)?.[1];
  return { compatibilityDate: date, compatibilityFlags: flags ? [...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) : [] };
}
