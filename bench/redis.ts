/**
 * The classic centralized design, for comparison: a Node reverse proxy that asks a local Redis
 * before forwarding (rate-limiter-flexible's RateLimiterRedis: one atomic Lua script per request,
 * through ioredis), and the same proxy without the limiter as its floor. The end-to-end part
 * measures both in the same interleaved rounds as the Workers.
 */
import { spawnSync } from "node:child_process";
import { Agent, createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { childScript } from "./lib/build";
import { ensureCommand, freePort, startChild, type Running } from "./lib/processes";

/** What the proxy does before forwarding: nothing, or one Redis round trip per request. */
export type ProxyMode = "bare" | "redis";

export interface ProxyConfig {
  origin: string;
  mode: ProxyMode;
  redisPort?: number;
  /** requests per key per `periodS` */
  limit: number;
  periodS: number;
}

export interface Redis {
  port: number;
  pid: number;
  version: string;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway `redis-server` on a free loopback port, with no persistence (no RDB snapshots,
 * no AOF), installing Debian's package first if it is missing. Throws with the reason when Redis
 * cannot be had.
 */
export async function startRedis(log: (line: string) => void): Promise<Redis> {
  const found = await ensureCommand("redis-server", "redis-server", log);
  if (!found.ok) throw new Error(found.note);
  const port = await freePort();
  const child: Running<string> = await startChild(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no", "--loglevel", "notice"],
    {
      name: "redis-server",
      ready: (line) => (/Ready to accept connections/i.test(line) ? "ready" : undefined),
    },
  );
  const version = /v=([\d.]+)/.exec(spawnSync("redis-server", ["--version"]).stdout?.toString() ?? "")?.[1] ?? "unknown";
  log(`redis-server ${version} on 127.0.0.1:${port} (${found.note})`);
  return { port, pid: child.pid, version, stop: child.stop };
}

export interface NodeProxy {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts the Node proxy in its own process. */
export async function startNodeProxy(config: ProxyConfig): Promise<NodeProxy> {
  const child: Running<{ port: number }> = await startChild(process.execPath, [await childScript(), "proxy", JSON.stringify(config)], {
    name: `node proxy (${config.mode})`,
  });
  return { url: `http://127.0.0.1:${child.ready.port}`, pid: child.pid, stop: child.stop };
}

/** RFC 9110 §7.6.1 connection-level headers, which a proxy does not pass on. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"]);

/**
 * The proxy itself (the child side): forwards every request to the origin over keep-alive
 * connections, streaming both bodies; in `redis` mode it first consumes one point for the
 * request's `CF-Connecting-IP` and answers 429 when the key is over its limit. Prints
 * `{"port": n}` once listening.
 */
export async function serveProxy(config: ProxyConfig): Promise<void> {
  const origin = new URL(config.origin);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const limiter = config.mode === "redis" ? await redisLimiter(config) : undefined;
  const server = createServer(async (req, res) => {
    if (limiter) {
      const key = header(req, "cf-connecting-ip") ?? "none";
      try {
        await limiter.consume(key);
      } catch (rejection) {
        req.resume();
        if (rejection instanceof Error) {
          res.writeHead(503, { "content-type": "text/plain" }).end(`limiter unavailable: ${rejection.message}`);
        } else {
          res.writeHead(429, { "content-type": "text/plain", "retry-after": "1" }).end("rate limited");
        }
        return;
      }
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    const upstream = httpRequest(
      { host: origin.hostname, port: origin.port, method: req.method, path: req.url, headers, agent },
      (answer) => {
        const back: OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) back[name] = value;
        res.writeHead(answer.statusCode ?? 502, back);
        answer.pipe(res);
      },
    );
    upstream.on("error", (error) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`origin unreachable: ${error.message}`);
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function redisLimiter(config: ProxyConfig) {
  const [{ Redis }, flexible] = await Promise.all([import("ioredis"), import("rate-limiter-flexible")]);
  const client = new Redis({ host: "127.0.0.1", port: config.redisPort, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  await new Promise<void>((resolve, reject) => {
    client.once("ready", () => resolve());
    client.once("error", reject);
  });
  return new flexible.RateLimiterRedis({ storeClient: client, points: config.limit, duration: config.periodS, keyPrefix: "floodgate-bench" });
}
