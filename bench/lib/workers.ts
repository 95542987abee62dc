/** The Workers the end-to-end bench compares, each in its own workerd through Miniflare, on a direct loopback socket. */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { Miniflare, type WorkerOptions } from "miniflare";
import { bundleFloodgate, compatibility } from "./build";
import { childPids } from "./processes";

/**
 * - `bare`: fetches the origin and returns its answer, nothing else: the floor.
 * - `floodgate`: src/index.ts with the given rules and its RateLimiter Durable Object (SQLite).
 * - `cf-ratelimit`: asks Cloudflare's rate-limiting binding (`[[ratelimits]]` in wrangler.toml,
 *   as Miniflare emulates it) for the client's `CF-Connecting-IP`, then fetches the origin.
 */
export type WorkerKind = "bare" | "floodgate" | "cf-ratelimit";

export interface WorkerOptionsForBench {
  originUrl: string;
  /** floodgate: RATE_LIMIT_RULES */
  rules?: unknown;
  /** cf-ratelimit: the binding's `simple.limit` per 60 s */
  limit?: number;
  /** opens workerd's V8 inspector (Chrome DevTools protocol) on this port, for profiling */
  inspectorPort?: number;
}

export interface RunningWorker {
  kind: WorkerKind;
  url: string;
  /** the workerd process, for CPU accounting; undefined when it could not be told apart */
  pid: number | undefined;
  /** where Durable Object storage lives: "tmpfs", or Miniflare's default temporary directory */
  storage: "tmpfs" | "default";
  /** floodgate: `GET /__floodgate/metrics`, Prometheus text */
  metrics(): Promise<string>;
  dispose(): Promise<void>;
}

/** The pass-through: the same thing every variant does after deciding. */
const BARE = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    return fetch(env.ORIGIN_URL + url.pathname + url.search, request);
  },
};`;

/** Cloudflare's own binding: one limit() call per request, keyed by the client address. */
const CF_RATELIMIT = `export default {
  async fetch(request, env) {
    const { success } = await env.RATE_LIMITER.limit({ key: request.headers.get("CF-Connecting-IP") ?? "none" });
    if (!success) return new Response("rate limited", { status: 429 });
    const url = new URL(request.url);
    return fetch(env.ORIGIN_URL + url.pathname + url.search, request);
  },
};`;

/**
 * Starts one Worker in a fresh workerd. Start them one at a time: the new workerd's pid is found
 * as the child process that was not there before.
 */
export async function startWorker(kind: WorkerKind, options: WorkerOptionsForBench): Promise<RunningWorker> {
  const adminToken = randomBytes(16).toString("hex");
  const common = { name: kind, modules: true, ...(await compatibility()), unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] };
  let worker: WorkerOptions;
  switch (kind) {
    case "bare":
      worker = { ...common, script: BARE, bindings: { ORIGIN_URL: options.originUrl } };
      break;
    case "cf-ratelimit":
      worker = {
        ...common,
        script: CF_RATELIMIT,
        bindings: { ORIGIN_URL: options.originUrl },
        ratelimits: { RATE_LIMITER: { simple: { limit: options.limit ?? 1_000_000_000, period: 60 } } },
      };
      break;
    case "floodgate":
      worker = {
        ...common,
        scriptPath: await bundleFloodgate(),
        bindings: { ORIGIN_URL: options.originUrl, RATE_LIMIT_RULES: JSON.stringify(options.rules ?? []), ADMIN_TOKEN: adminToken },
        durableObjects: { LIMITER: { className: "RateLimiter", useSQLite: true } },
      };
      break;
  }
  const storage = await storageDir();
  const before = new Set(childPids("workerd"));
  const mf = new Miniflare({ host: "127.0.0.1", port: 0, cf: false, inspectorPort: options.inspectorPort, ...(storage ? { durableObjectsPersist: storage } : {}), workers: [worker] });
  const dispose = async () => {
    await mf.dispose();
    if (storage) await rm(storage, { recursive: true, force: true });
  };
  try {
    await mf.ready;
    const url = (await mf.unsafeGetDirectURL(kind)).href.replace(/\/$/, "");
    const fresh = childPids("workerd").filter((pid) => !before.has(pid));
    return {
      kind,
      url,
      pid: fresh.length === 1 ? fresh[0] : undefined,
      async metrics() {
        if (kind !== "floodgate") return "";
        const response = await fetch(`${url}/__floodgate/metrics`, { headers: { Authorization: `Bearer ${adminToken}` } });
        const text = await response.text();
        if (response.status !== 200) throw new Error(`metrics: HTTP ${response.status}: ${text.slice(0, 200)}`);
        return text;
      },
      storage: storage ? "tmpfs" : "default",
      dispose,
    };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * Durable Object storage on tmpfs (/dev/shm) when there is one. Miniflare otherwise keeps each
 * object's SQLite database in a temporary directory on disk, and every write then pays for the
 * disk: on this machine a strict decision cost about ten times the CPU with 1,000 keys. Production
 * objects do not wait on a local disk per write (durability comes from replication), so the disk
 * would measure the emulation rather than floodgate.
 */
async function storageDir(): Promise<string | undefined> {
  if (!existsSync("/dev/shm")) return undefined;
  try {
    return await mkdtemp(join("/dev/shm", "floodgate-bench-"));
  } catch {
    return undefined;
  }
}

/**
 * Prometheus samples summed by name and the given label, e.g. `byLabel(text,
 * "floodgate_durable_object_calls_total", "method")` → `{ decide: 812, sync: 20 }`.
 */
export function byLabel(text: string, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+([-+\d.eE]+|NaN|[+-]Inf)$/.exec(line.trim());
    if (!match || match[1] !== name) continue;
    const value = new RegExp(`${label}="((?:[^"\\\\]|\\\\.)*)"`).exec(match[2] ?? "")?.[1] ?? "";
    out[value] = (out[value] ?? 0) + Number(match[3]);
  }
  return out;
}

/** The difference of two {@link byLabel} readings. */
export function minus(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of new Set([...Object.keys(after), ...Object.keys(before)])) {
    const delta = (after[key] ?? 0) - (before[key] ?? 0);
    if (delta !== 0) out[key] = delta;
  }
  return out;
}
