// N front Workers from one bundle, each its own isolate, sharing one RateLimiter namespace hosted by another Worker.
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { build } from "esbuild";
import { Miniflare, type WorkerOptions } from "miniflare";
import { bundleWorker, type Bundle } from "./bundle";
import { ROOT } from "./root";
import { WORKER_BUILD } from "./worker-build";

/** What {@link startCluster} runs. */
export interface ClusterOptions {
  /** how many front Workers (isolates) to run, 1 to 64 */
  isolates: number;
  /** RATE_LIMIT_RULES for every front: a string is passed as is, anything else as JSON */
  rules: unknown;
  /**
   * Two or more Worker versions live at once, as in a gradual deployment: front i runs with
   * `versions[i % versions.length]` as its RATE_LIMIT_RULES instead of `rules`
   */
  versions?: unknown[];
  /** ORIGIN_URL for every front; absent: "demo", the built-in echo origin */
  originUrl?: string;
  /** more vars for every front; they win over the ones above, ADMIN_TOKEN included */
  bindings?: Record<string, string>;
  /** the Worker to run, fronts and objects alike; absent: this checkout's (see {@link bundleWorker}) */
  bundle?: Bundle;
  /**
   * A round trip between every front and the objects, in ms: the objects are then this checkout's
   * RateLimiter wrapped in test/fixtures/distant-limiter.ts, which waits half of it before each
   * call and half after. Absent or 0: no wait, and the objects are the bundle's own.
   */
  objectDelayMs?: number;
  /**
   * The Cloudflare location each front runs in: front i's requests carry
   * `request.cf.colo = locations[i % locations.length]`. Absent (and `continents` too): no
   * `request.cf` at all, since a front's direct socket takes it only from Miniflare's header.
   */
  locations?: string[];
  /** The continent each front runs in, likewise: `request.cf.continent = continents[i % continents.length]`. */
  continents?: string[];
}

/** One front Worker, reached over its own loopback socket. */
export interface Front {
  /** the Worker's name in Miniflare: `front-<i>` */
  name: string;
  /** where its socket listens, e.g. http://127.0.0.1:40717/ */
  url: URL;
  /**
   * Sends a request to this front. A path is resolved against {@link url} and goes over the
   * front's socket. An absolute URL on another host (`https://api.example.com/x`, to exercise
   * `match.host`) goes through Miniflare's binding proxy instead, so the Worker sees that exact URL:
   * Node's fetch will not send a Host header of your choosing.
   */
  fetch(input: string | URL, init?: RequestInit): Promise<Response>;
}

/** A running cluster; call {@link dispose} when done. */
export interface Cluster {
  fronts: Front[];
  /** Sends a request to front `isolate` (see {@link Front.fetch}). */
  fetch(isolate: number, url: string | URL, init?: RequestInit): Promise<Response>;
  /** That isolate's `GET /__floodgate/metrics`, in the Prometheus text format. */
  metrics(isolate: number): Promise<string>;
  /**
   * What workerd and the Workers wrote (console output, uncaught errors), oldest first, the last
   * {@link LOG_LINES} lines. Set FLOODGATE_HARNESS_LOGS=1 to also see them as they come.
   */
  logs(): string[];
  /**
   * How many calls of each method the object named `name` received: with `objectDelayMs` only,
   * whose fixture counts them (test/fixtures/distant-limiter.ts).
   */
  received(name: string): Promise<Record<string, number>>;
  /** The most calls of each method the object named `name` had on their way or being served at once (with `objectDelayMs` only, as {@link received}). */
  mostAtOnce(name: string): Promise<Record<string, number>>;
  /** Stops workerd; in-memory Durable Object state goes with it. */
  dispose(): Promise<void>;
}

/** How many lines of workerd's output a cluster keeps. */
export const LOG_LINES = 1_000;

/** The name of the Worker that hosts the RateLimiter class; the fronts' LIMITER binds to it. */
export const LIMITER_WORKER = "limiter";

/**
 * Starts one workerd with a `limiter` Worker that hosts `RateLimiter` (SQLite-backed, in-memory
 * storage) and `isolates` front Workers built from the same bundle, each with its own isolate and
 * module state, whose `LIMITER` binding is that one namespace: as N Cloudflare isolates in front of
 * one set of Durable Objects. Each front listens on its own loopback port and gets
 * `RATE_LIMIT_RULES`, `ORIGIN_URL` and a random `ADMIN_TOKEN` (so {@link Cluster.metrics} works).
 *
 * @example
 * const cluster = await startCluster({ isolates: 4, rules: [{ name: "r", key: "global", limit: 5, period: "1m" }] });
 * try {
 *   const response = await cluster.fetch(2, "/anything");
 * } finally {
 *   await cluster.dispose();
 * }
 */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const { isolates, rules, versions, originUrl = "demo", bindings = {}, objectDelayMs = 0 } = options;
  if (!Number.isInteger(isolates) || isolates < 1 || isolates > 64) {
    throw new RangeError(`startCluster: isolates must be an integer from 1 to 64, got ${isolates}`);
  }
  if (!(objectDelayMs >= 0 && objectDelayMs <= 10_000)) throw new RangeError(`startCluster: objectDelayMs must be from 0 to 10000, got ${objectDelayMs}`);
  const [bundle, compatibility, distant] = await Promise.all([options.bundle ?? bundleWorker(), readCompatibility(), objectDelayMs > 0 ? buildDistantLimiter() : undefined]);
  const limiterClass = distant ? "DistantLimiter" : "RateLimiter";
  const rulesText = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));
  const vars: Record<string, string> = {
    RATE_LIMIT_RULES: rulesText(rules),
    ORIGIN_URL: originUrl,
    ADMIN_TOKEN: randomBytes(16).toString("hex"),
    ...bindings,
  };
  const worker = (name: string): WorkerOptions => ({ name, modules: true, scriptPath: bundle.path, ...compatibility });
  const logs: string[] = [];
  const drained: Promise<void>[] = [];
  const mf = new Miniflare({
    host: "127.0.0.1",
    cf: false,
    handleRuntimeStdio: (stdout, stderr) => {
      drained.push(collect(stdout, logs, process.stdout), collect(stderr, logs, process.stderr));
    },
    workers: [
      {
        ...(distant ? { name: LIMITER_WORKER, modules: true, script: distant, ...compatibility, bindings: { OBJECT_DELAY_MS: String(objectDelayMs) } } : worker(LIMITER_WORKER)),
        durableObjects: { LIMITER: { className: limiterClass, useSQLite: true } },
      },
      ...Array.from({ length: isolates }, (_, i) => ({
        ...worker(frontName(i)),
        bindings: versions ? { ...vars, RATE_LIMIT_RULES: rulesText(versions[i % versions.length]) } : vars,
        durableObjects: { LIMITER: { className: limiterClass, scriptName: LIMITER_WORKER, useSQLite: true } },
        unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      })),
    ],
  });
  try {
    await mf.ready;
    const urls = await Promise.all(Array.from({ length: isolates }, (_, i) => mf.unsafeGetDirectURL(frontName(i))));
    const viaProxy = (i: number) => async (target: URL, init: RequestInit) => {
      const fetcher = await mf.getWorker(frontName(i));
      return fetcher.fetch(target.href, init as never) as unknown as Promise<Response>;
    };
    const located = (i: number, init: RequestInit = {}): RequestInit => {
      const { locations = [], continents = [] } = options;
      if (locations.length === 0 && continents.length === 0) return init;
      const cf = { ...(locations.length ? { colo: locations[i % locations.length] } : {}), ...(continents.length ? { continent: continents[i % continents.length] } : {}) };
      // Miniflare reads a request's `cf` from this header on a front's socket.
      const headers = new Headers(init.headers);
      headers.set("MF-CF-Blob", JSON.stringify(cf));
      return { ...init, headers };
    };
    const fronts = urls.map((url, i): Front => ({ name: frontName(i), url, fetch: (input, init) => send(url, input, located(i, init), viaProxy(i)) }));
    const front = (isolate: number): Front => {
      const found = fronts[isolate];
      if (!found) throw new RangeError(`no isolate ${isolate}: the cluster has ${fronts.length} (0 to ${fronts.length - 1})`);
      return found;
    };
    /** The fixture's own stub for the object named `name`, to read what it counted. */
    const distantStub = async (what: string, name: string) => {
      if (!distant) throw new Error(`${what}: only a cluster with objectDelayMs counts the calls its objects receive`);
      const namespace = await mf.getDurableObjectNamespace("LIMITER", LIMITER_WORKER);
      return namespace.get(namespace.idFromName(name)) as unknown as { received(): Promise<Record<string, number>>; mostAtOnce(): Promise<Record<string, number>> };
    };
    return {
      fronts,
      fetch: (isolate, url, init) => front(isolate).fetch(url, init),
      async metrics(isolate) {
        const response = await front(isolate).fetch("/__floodgate/metrics", { headers: { Authorization: `Bearer ${vars.ADMIN_TOKEN}` } });
        const text = await response.text();
        if (response.status !== 200) throw new Error(`metrics of isolate ${isolate}: HTTP ${response.status}: ${text.slice(0, 200)}`);
        return text;
      },
      logs: () => [...logs],
      received: async (name) => (await distantStub("received", name)).received(),
      mostAtOnce: async (name) => (await distantStub("mostAtOnce", name)).mostAtOnce(),
      dispose: () => mf.dispose(),
    };
  } catch (error) {
    await mf.dispose().catch(() => undefined); // a runtime that failed to start fails to stop, too
    // workerd's own account of a failed start is in its output, not in Miniflare's error: let it arrive.
    await Promise.race([Promise.all(drained), quiet(logs, 100, 2_000)]);
    if (logs.length === 0) throw error;
    throw new Error(`startCluster: ${error instanceof Error ? error.message : String(error)}\nworkerd said:\n${logs.slice(-20).join("\n")}`, { cause: error });
  }
}

/**
 * Keeps the stream's last lines in `into`, echoing them to `echo` when FLOODGATE_HARNESS_LOGS is
 * set; resolves once the stream has ended and every line is in.
 */
function collect(stream: Readable, into: string[], echo: NodeJS.WriteStream): Promise<void> {
  const verbose = Boolean(process.env.FLOODGATE_HARNESS_LOGS);
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  lines.on("line", (line) => {
    into.push(line);
    if (into.length > LOG_LINES) into.splice(0, into.length - LOG_LINES);
    if (verbose) echo.write(`${line}\n`);
  });
  return new Promise((resolve) => lines.once("close", resolve));
}

/** Resolves once `lines` has not grown for `idleMs`, or after `maxMs` at most. */
async function quiet(lines: string[], idleMs: number, maxMs: number): Promise<void> {
  const until = Date.now() + maxMs;
  let seen = -1;
  while (lines.length !== seen && Date.now() < until) {
    seen = lines.length;
    await new Promise((resolve) => setTimeout(resolve, idleMs));
  }
}

function frontName(i: number): string {
  return `front-${i}`;
}

type Send = (target: URL, init: RequestInit) => Promise<Response>;

async function send(base: URL, input: string | URL, init: RequestInit = {}, viaProxy: Send): Promise<Response> {
  const target = new URL(input, base);
  if (target.host === base.host) return fetch(target, init);
  // Miniflare's Response comes from its own copy of undici; rebuild it as this process's Response.
  const response = await viaProxy(target, init);
  const body = [101, 204, 205, 304].includes(response.status) ? null : response.body;
  return new Response(body, { status: response.status, statusText: response.statusText, headers: new Headers([...response.headers]) });
}

/** test/fixtures/distant-limiter.ts as one ES module, the real RateLimiter from this checkout's src/ inside (class `DistantLimiter`, binding `OBJECT_DELAY_MS`). */
export async function buildDistantLimiter(): Promise<string> {
  const result = await build({ ...WORKER_BUILD, entryPoints: [join(ROOT, "test/fixtures/distant-limiter.ts")], write: false });
  return result.outputFiles[0]!.text;
}

/** The deploy's compatibility date and flags, read from wrangler.toml's top level. */
async function readCompatibility(): Promise<Pick<WorkerOptions, "compatibilityDate" | "compatibilityFlags">> {
  const toml = await readFile(join(ROOT, "wrangler.toml"), "utf8");
  const topLevel = toml.split(/^\s*\[/m)[0] ?? "";
  const date = /^\s*compatibility_date\s*=\s*"([^"]+)"/m.exec(topLevel)?.[1];
  if (!date) throw new Error("wrangler.toml has no top-level compatibility_date");
  const flags = /^\s*compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(topLevel)?.[1];
  const compatibilityFlags = flags ? [...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) : [];
  return { compatibilityDate: date, compatibilityFlags };
}
