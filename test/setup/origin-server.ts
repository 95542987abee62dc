// A real origin for the runtime tests: a Node HTTP server on loopback that records every request it receives.
import { createServer, type IncomingMessage } from "node:http";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";

/** What the origin saw of one request. */
export interface Received {
  /** when it arrived, epoch ms */
  at: number;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  bodyBytes: number;
  bodySha256: string;
  /** whether the body arrived in more than one chunk, i.e. was streamed */
  chunks: number;
}

/**
 * Starts the origin. `GET /__origin/log?tag=<t>` answers the requests recorded whose path contains
 * `/<t>/` (so each test reads only its own traffic: the fuzz tests send short random path segments
 * to this same origin, so a tag must be a name they cannot make, like `fault-allow`, not `fa`),
 * `GET /__origin/count?tag=<t>` just how many there are, as `{"count": n}`; every other request is
 * recorded and answered 200 with a small JSON body and a header `x-origin: yes`. `/<t>/redirect` answers 302.
 */
export async function startOrigin(): Promise<{ port: number; close(): Promise<void> }> {
  const log: Received[] = [];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://origin");
    if (url.pathname === "/__origin/log" || url.pathname === "/__origin/count") {
      const tag = `/${url.searchParams.get("tag")}/`;
      const tagged = log.filter((r) => r.url.includes(tag));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(url.pathname === "/__origin/log" ? tagged : { count: tagged.length }));
      return;
    }
    const at = Date.now();
    const body = await readBody(req);
    log.push({ at, method: req.method ?? "", url: req.url ?? "", headers: req.headers, ...body });
    if (url.pathname.endsWith("/redirect")) {
      res.writeHead(302, { location: "/elsewhere" }).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "x-origin": "yes" });
    res.end(JSON.stringify({ ok: true, seen: log.length }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function readBody(req: IncomingMessage): Promise<Pick<Received, "bodyBytes" | "bodySha256" | "chunks">> {
  const hash = createHash("sha256");
  let bodyBytes = 0;
  let chunks = 0;
  for await (const chunk of req) {
    hash.update(chunk as Buffer);
    bodyBytes += (chunk as Buffer).length;
    chunks++;
  }
  return { bodyBytes, bodySha256: hash.digest("hex"), chunks };
}
