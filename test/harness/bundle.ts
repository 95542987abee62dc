// Builds floodgate's Worker (src/index.ts) into one ES module for Miniflare, cached by the sources' content.
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { build, version as esbuildVersion, type BuildOptions } from "esbuild";
import { ROOT } from "./root";
import { WORKER_BUILD } from "./worker-build";

const CACHE = join(ROOT, "node_modules/.cache/floodgate-harness");

/** One built Worker module on disk. */
export interface Bundle {
  /** absolute path of the ES module (a linked source map sits beside it) */
  path: string;
  /** content hash of the sources and build options it was built from */
  hash: string;
}

/** As wrangler bundles a module Worker, with a source map so errors point into src/. */
const OPTIONS = { ...WORKER_BUILD, sourcemap: "linked" } satisfies BuildOptions;

const built = new Map<string, Promise<Bundle>>();

/**
 * The Worker bundle of the sources under `root` (this checkout by default; the bench also builds
 * a past commit's, extracted elsewhere), built at most once per process and reused across
 * processes while they are unchanged: the output is keyed by a hash of every file under
 * `root`/src, the esbuild version and the build options, under
 * node_modules/.cache/floodgate-harness/<hash>/index.js.
 *
 * @example
 * const { path } = await bundleWorker(); // then `new Miniflare({ modules: true, scriptPath: path })`
 */
export function bundleWorker(root = ROOT): Promise<Bundle> {
  let bundle = built.get(root);
  if (!bundle) {
    bundle = buildOnce(root).catch((error: unknown) => {
      built.delete(root);
      throw error;
    });
    built.set(root, bundle);
  }
  return bundle;
}

async function buildOnce(root: string): Promise<Bundle> {
  const hash = await sourceHash(root);
  const dir = join(CACHE, hash);
  const path = join(dir, "index.js");
  if (await exists(path)) return { path, hash };
  // Build beside the final place and rename, so a concurrent run never sees a half-written bundle.
  const scratch = `${dir}.${process.pid}.${Date.now()}`;
  await mkdir(scratch, { recursive: true });
  try {
    await build({ ...OPTIONS, entryPoints: [join(root, "src/index.ts")], outfile: join(scratch, "index.js") });
    await rename(scratch, dir).catch(async (error: NodeJS.ErrnoException) => {
      // Another process finished the same build first: theirs is identical.
      if (!(await exists(path))) throw error;
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  await prune(KEEP);
  return { path, hash };
}

/** Old bundles pile up as src/ changes; the newest few are kept, for runs on other branches. */
const KEEP = 8;

async function prune(keep: number): Promise<void> {
  const entries = await readdir(CACHE, { withFileTypes: true });
  const dirs = await Promise.all(
    entries.filter((e) => e.isDirectory() && /^[0-9a-f]{16}$/.test(e.name)).map(async (e) => ({ path: join(CACHE, e.name), mtime: (await stat(join(CACHE, e.name))).mtimeMs })),
  );
  const stale = dirs.sort((a, b) => b.mtime - a.mtime).slice(keep);
  await Promise.all(stale.map((d) => rm(d.path, { recursive: true, force: true })));
}

/** Hashes every file under `root`/src (path and content), the esbuild version and the options. */
async function sourceHash(root: string): Promise<string> {
  const hash = createHash("sha256").update(`esbuild ${esbuildVersion}\n${JSON.stringify(OPTIONS)}\n`);
  const files = (await listFiles(join(root, "src"))).sort();
  for (const file of files) hash.update(`${relative(root, file)}\n`).update(await readFile(file)).update("\n");
  return hash.digest("hex").slice(0, 16);
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      return entry.isDirectory() ? listFiles(path) : Promise.resolve(entry.isFile() ? [path] : []);
    }),
  );
  return nested.flat();
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
