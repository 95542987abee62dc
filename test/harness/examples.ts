// Runs a Worker as its own wrangler.toml describes it (the examples/, or a project made from one) in Miniflare, beside the floodgate Worker it binds.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { build, type Plugin } from "esbuild";
import { Miniflare, type WorkerOptions } from "miniflare";
import { bundleWorker } from "./bundle";
import { ROOT } from "./root";
import { WORKER_BUILD } from "./worker-build";

/** examples/ in this checkout. */
export const EXAMPLES = join(ROOT, "examples");

/** What the harness reads of a wrangler config: the Worker, and the bindings Miniflare needs to run it. */
export interface WorkerConfig {
  /** the config file it was read from */
  path: string;
  name: string;
  /** absolute path of the entry */
  main: string;
  compatibilityDate: string;
  compatibilityFlags: string[];
  /** `[vars]`, as wrangler passes them: strings, or objects for TOML tables */
  vars: Record<string, unknown>;
  durableObjects: { name: string; className: string; scriptName?: string }[];
  /** classes a migration declares with `new_sqlite_classes` */
  sqliteClasses: string[];
  services: { binding: string; service: string; entrypoint?: string; props?: Record<string, unknown> }[];
  ratelimits: { name: string; namespaceId: string; limit: number; period: number }[];
}

/** Reads a wrangler config the way `wrangler dev` and `wrangler deploy` do (wrangler's own reader), top level only. */
export async function readWorkerConfig(path: string): Promise<WorkerConfig> {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({ config: path }, { hideWarnings: true }) as unknown as WranglerConfig;
  if (!config.main) throw new Error(`${path}: no main`);
  if (!config.compatibility_date) throw new Error(`${path}: no compatibility_date`);
  return {
    path,
    name: config.name ?? "worker",
    main: config.main,
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags ?? [],
    vars: config.vars ?? {},
    durableObjects: config.durable_objects.bindings.map((b) => ({ name: b.name, className: b.class_name, ...(b.script_name ? { scriptName: b.script_name } : {}) })),
    sqliteClasses: config.migrations.flatMap((m) => m.new_sqlite_classes ?? []),
    services: (config.services ?? []).map((s) => ({
      binding: s.binding,
      service: s.service,
      ...(s.entrypoint ? { entrypoint: s.entrypoint } : {}),
      ...(s.props ? { props: s.props } : {}),
    })),
    ratelimits: config.ratelimits.map((r) => ({ name: r.name, namespaceId: r.namespace_id, limit: r.simple.limit, period: r.simple.period })),
  };
}

/** The part of wrangler's resolved config read here (its own type does not resolve under Node's types alone). */
interface WranglerConfig {
  name?: string;
  main?: string;
  compatibility_date?: string;
  compatibility_flags?: string[];
  vars?: Record<string, unknown>;
  durable_objects: { bindings: { name: string; class_name: string; script_name?: string }[] };
  migrations: { new_sqlite_classes?: string[] }[];
  services?: { binding: string; service: string; entrypoint?: string; props?: Record<string, unknown> }[];
  ratelimits: { name: string; namespace_id: string; simple: { limit: number; period: number } }[];
}

/**
 * Miniflare's options for the Worker a config describes, from a built module: its vars, its
 * Durable Objects (SQLite-backed when a migration says so), its service bindings (the Worker a
 * binding names must run in the same Miniflare) and its rate-limiting bindings (Miniflare's
 * emulation of Cloudflare's).
 */
export function workerOptions(config: WorkerConfig, scriptPath: string): WorkerOptions {
  return {
    name: config.name,
    modules: true,
    scriptPath,
    // Module names are paths relative to this root, which must hold the script (a temporary directory, say).
    modulesRoot: dirname(scriptPath),
    compatibilityDate: config.compatibilityDate,
    compatibilityFlags: config.compatibilityFlags,
    bindings: config.vars as Record<string, string>,
    durableObjects: Object.fromEntries(
      config.durableObjects.map((d) => [d.name, { className: d.className, useSQLite: config.sqliteClasses.includes(d.className), ...(d.scriptName ? { scriptName: d.scriptName } : {}) }]),
    ),
    serviceBindings: Object.fromEntries(
      config.services.map((s) => [s.binding, { name: s.service, ...(s.entrypoint ? { entrypoint: s.entrypoint } : {}), ...(s.props ? { props: s.props } : {}) }]),
    ),
    ratelimits: Object.fromEntries(config.ratelimits.map((r) => [r.name, { simple: { limit: r.limit, period: r.period } }])),
  };
}

/**
 * The floodgate Worker a config describes (an example's floodgate.toml), run from this checkout's
 * bundle ({@link bundleWorker}) with its vars, ORIGIN_URL replaced by `originUrl`.
 */
export async function floodgateWorker(config: WorkerConfig, originUrl: string): Promise<WorkerOptions> {
  if (config.main !== join(ROOT, "src/index.ts")) throw new Error(`${config.path}: main must be floodgate's src/index.ts, got ${config.main}`);
  const bundle = await bundleWorker();
  const options = workerOptions(config, bundle.path);
  return { ...options, bindings: { ...(options.bindings as Record<string, string>), ORIGIN_URL: originUrl } };
}

/** Where `floodgate` and `floodgate/hono` come from when an example is built. */
export type FloodgateFrom =
  /** this checkout's src/lib.ts and src/hono/index.ts, so CI needs no install in the example's folder */
  | "source"
  /** the entry's own node_modules (an installed package), as a user's build resolves it */
  | "installed";

/** One built Worker module, and the files esbuild read to make it (relative to its working directory). */
export interface BuiltExample {
  path: string;
  inputs: string[];
}

/**
 * Bundles a Worker's entry as wrangler would into `outdir`/`name`.js. With `from: "source"`,
 * `floodgate` and `floodgate/hono` resolve to this checkout's sources; everything else (hono)
 * resolves from the entry's folder up, as usual.
 */
export async function buildEntry(entry: string, outdir: string, name: string, from: FloodgateFrom, workingDir = ROOT): Promise<BuiltExample> {
  const path = join(outdir, `${name}.js`);
  const result = await build({
    ...WORKER_BUILD,
    absWorkingDir: workingDir,
    entryPoints: [entry],
    outfile: path,
    metafile: true,
    plugins: from === "source" ? [floodgateFromSource] : [],
  });
  return { path, inputs: Object.keys(result.metafile.inputs) };
}

const SOURCES: Record<string, string> = {
  floodgate: join(ROOT, "src/lib.ts"),
  "floodgate/hono": join(ROOT, "src/hono/index.ts"),
};

const floodgateFromSource: Plugin = {
  name: "floodgate-from-source",
  setup(build) {
    build.onResolve({ filter: /^floodgate(\/.*)?$/ }, (args) => {
      const path = SOURCES[args.path];
      if (!path) return { errors: [{ text: `"${args.path}" is not an export of floodgate (only "floodgate" and "floodgate/hono")` }] };
      return { path };
    });
  },
};

/** A Miniflare running some Workers; the first is the one {@link Running.fetch} reaches. */
export interface Running {
  mf: Miniflare;
  /** Sends a request to the first Worker. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Sends a request to the Worker of that name. */
  fetchWorker(name: string, path: string, init?: RequestInit): Promise<Response>;
  dispose(): Promise<void>;
}

/** Starts the Workers in one Miniflare (one workerd), on loopback, with no `cf` lookups. */
export async function run(workers: WorkerOptions[]): Promise<Running> {
  const mf = new Miniflare({ host: "127.0.0.1", cf: false, workers });
  await mf.ready;
  const asResponse = (r: Awaited<ReturnType<Miniflare["dispatchFetch"]>>) => r as unknown as Response;
  return {
    mf,
    fetch: async (path, init) => asResponse(await mf.dispatchFetch(new URL(path, "http://example.test").href, init as never)),
    fetchWorker: async (name, path, init) => asResponse(await (await mf.getWorker(name)).fetch(new URL(path, "http://example.test").href, init as never)),
    dispose: () => mf.dispose(),
  };
}

/** A fresh temporary directory, and its removal. */
export async function scratch(prefix: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** What a batch of concurrent requests got: statuses, and each response's body read as text. */
export interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** Sends `n` requests at once and reads them all. */
export async function concurrently(n: number, send: (i: number) => Promise<Response>): Promise<Answer[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const response = await send(i);
      return { status: response.status, headers: new Headers([...response.headers]), body: await response.text() };
    }),
  );
}

/** The problem type floodgate's 429 carries (draft-ietf-httpapi-ratelimit-headers -10). */
export const QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** How many of a batch got each status, e.g. `{ 200: 5, 429: 35 }`. */
export function statusCounts(answers: Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
}

/** The origin's count of requests whose path has `/<tag>/` (test/setup/origin-server.ts). */
export async function originCount(originUrl: string, tag: string): Promise<number> {
  return ((await (await fetch(`${originUrl}/__origin/count?tag=${tag}`)).json()) as { count: number }).count;
}
