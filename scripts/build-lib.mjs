// Builds the `floodgate` package into dist/: ESM JavaScript for src/lib.ts ("floodgate") and src/hono/index.ts
// ("floodgate/hono"), sharing one copy of module state, plus .d.ts. Run by `npm run build`, prepare and prepack.
import { execFileSync } from "node:child_process";
import { readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const started = Date.now();

await rm(dist, { recursive: true, force: true });

// Both entries in one build with splitting: what they share (the isolate's caches, circuit breakers, metrics,
// fast-mode leases) lives in one chunk, so importing "floodgate" and "floodgate/hono" never makes two copies.
await build({
  absWorkingDir: root,
  entryPoints: { lib: "src/lib.ts", "hono/index": "src/hono/index.ts" },
  outdir: dist,
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  // The runtime's modules, and hono (an optional peer: only types are imported from it today).
  external: ["cloudflare:*", "hono", "hono/*"],
  logLevel: "warning",
});

// Declarations from the sources, by the repository's own TypeScript; a type error fails the build. tsc reports on
// stdout: sent to stderr, so that `npm pack --json` (which runs this as `prepare`) prints nothing but its JSON.
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.lib.json")], { cwd: root, stdio: ["ignore", 2, 2] });
await addExtensions(dist);

console.error(`floodgate: built dist/ in ${Date.now() - started} ms`);

/**
 * tsc writes relative imports as the sources do, without extensions ("./config/rules"), which only
 * `moduleResolution: "bundler"` resolves. A user on "node16"/"nodenext" needs "./config/rules.js"
 * (or "./hono/index.js"): written here, so the declarations work under either.
 */
async function addExtensions(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      await addExtensions(path);
      continue;
    }
    if (!entry.name.endsWith(".d.ts")) continue;
    const text = await readFile(path, "utf8");
    const specifiers = [...text.matchAll(/(from\s+|import\s*\(\s*)"(\.{1,2}\/[^"]*)"/g)];
    let out = text;
    for (const [whole, lead, specifier] of specifiers) {
      if (/\.(js|mjs|cjs|json)$/.test(specifier)) continue;
      const base = join(dirname(path), specifier);
      const file = (await isFile(`${base}.d.ts`)) ? `${specifier}.js` : (await isFile(join(base, "index.d.ts"))) ? `${specifier}/index.js` : undefined;
      if (!file) throw new Error(`build-lib: ${path} imports ${specifier}, which has no declaration file`);
      out = out.replace(whole, `${lead}"${file}"`);
    }
    if (out !== text) await writeFile(path, out);
  }
}

async function isFile(path) {
  return stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}
