/** The origin every variant proxies to: a small, fast Node HTTP server in its own process, on loopback. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { childScript } from "./build";
import { startChild, type Running } from "./processes";

/** What the origin answers: a small JSON body, like an API's. */
const BODY = JSON.stringify({ ok: true, items: [{ id: 42, name: "widget", price: 9.99 }], served_by: "bench-origin" });

/**
 * Serves the origin in this process (the child side): every request's body is read, then answered
 * 200 with {@link BODY}; `GET /__origin/count` answers how many requests it has served. Prints
 * `{"port": n}` once listening.
 */
export async function serveOrigin(): Promise<void> {
  let served = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/__origin/count") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ count: served }));
        return;
      }
      served++;
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) }).end(BODY);
    });
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
}

export interface Origin {
  url: string;
  pid: number;
  /** how many requests it has served, origin-count calls excluded */
  count(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the origin in its own Node process and returns its loopback URL. */
export async function startOrigin(): Promise<Origin> {
  const child: Running<{ port: number }> = await startChild(process.execPath, [await childScript(), "origin"], { name: "origin" });
  const url = `http://127.0.0.1:${child.ready.port}`;
  return {
    url,
    pid: child.pid,
    async count() {
      const response = await fetch(`${url}/__origin/count`);
      return ((await response.json()) as { count: number }).count;
    },
    stop: child.stop,
  };
}
