// A real origin for the runtime tests: a Node HTTP server on loopback that records every request it receives.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";

/** What the origin saw of one request. */
export interface Received {
  /** when it arrived, epoch ms */
  at: number;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** each header's field lines as they arrived, lower-cased names: what an origin reading only the first line of a name sees */
  lines: Record<string, string[]>;
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
 * A slow origin, for concurrency: `?wait=<ms>` answers only after that long, `?drip=<ms>` sends
 * the headers and a first line at once and ends the body that much later, `?fail=1` drops the
 * connection without answering; `GET /__origin/inflight?tag=<t>` answers `{"current", "max"}`,
 * how many requests under `/<t>/` it is serving now and at most so far (from arrival until the
 * response has ended or the connection closed). A WebSocket upgrade on any path is accepted,
 * recorded, and echoes each message back prefixed "echo:", text as text and binary as binary.
 */
export async function startOrigin(): Promise<{ port: number; close(): Promise<void> }> {
  const log: Received[] = [];
  const inFlight = new Map<string, { current: number; max: number }>();
  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://origin");
    if (url.pathname === "/__origin/inflight") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(inFlight.get(url.searchParams.get("tag") ?? "") ?? { current: 0, max: 0 }));
      return;
    }
    if (url.pathname === "/__origin/log" || url.pathname === "/__origin/count") {
      const tag = `/${url.searchParams.get("tag")}/`;
      const tagged = log.filter((r) => r.url.includes(tag));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(url.pathname === "/__origin/log" ? tagged : { count: tagged.length }));
      return;
    }
    const tag = url.pathname.split("/")[1] ?? "";
    const serving = inFlight.get(tag) ?? { current: 0, max: 0 };
    inFlight.set(tag, serving);
    serving.current++;
    serving.max = Math.max(serving.max, serving.current);
    res.on("close", () => serving.current--);
    const at = Date.now();
    const body = await readBody(req);
    log.push({ at, method: req.method ?? "", url: req.url ?? "", headers: req.headers, lines: req.headersDistinct as Record<string, string[]>, ...body });
    const [wait, drip] = [Number(url.searchParams.get("wait") ?? 0), Number(url.searchParams.get("drip") ?? 0)];
    if (url.searchParams.has("fail")) {
      req.socket.destroy();
      return;
    }
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    if (drip > 0) {
      res.writeHead(200, { "content-type": "text/plain", "x-origin": "yes" });
      res.write("first\n");
      setTimeout(() => res.end("last\n"), drip);
      return;
    }
    if (url.pathname.endsWith("/early-hints")) {
      res.writeEarlyHints({ link: "</style.css>; rel=preload; as=style" });
      setTimeout(() => res.writeHead(200, { "content-type": "text/plain" }).end("after hints"), 50);
      return;
    }
    if (url.pathname.endsWith("/redirect")) {
      res.writeHead(302, { location: "/elsewhere" }).end();
      return;
    }
    // ?status=<code> and ?h=<name>:<value> (repeatable): an origin with answers and headers of its own.
    const own = Object.fromEntries(url.searchParams.getAll("h").map((h) => [h.slice(0, h.indexOf(":")), h.slice(h.indexOf(":") + 1)]));
    const answer = JSON.stringify({ ok: true, seen: log.length });
    // ?sized: the body's length in Content-Length, where Node otherwise sends it chunked.
    const sized = url.searchParams.has("sized") ? { "content-length": String(Buffer.byteLength(answer)) } : {};
    res.writeHead(Number(url.searchParams.get("status") ?? 200), { "content-type": "application/json", "x-origin": "yes", ...sized, ...own });
    res.end(answer);
  };
  // A request it cannot answer as asked (a fuzzed ?h=<name>:<value> or ?status= that Node refuses) gets the origin's
  // own 400, never an unhandled rejection, which ended the whole test run.
  const server = createServer((req, res) => void serve(req, res).catch((error: unknown) => refuse(res, error)));
  // A WebSocket on any path: each message comes back prefixed "echo:", and the upgrade is recorded like a request.
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    log.push({ at: Date.now(), method: req.method ?? "", url: req.url ?? "", headers: req.headers, lines: req.headersDistinct as Record<string, string[]>, bodyBytes: 0, bodySha256: "", chunks: 0 });
    sockets.handleUpgrade(req, socket, head, (ws) => ws.on("message", (data, binary) => (binary ? ws.send(Buffer.concat([Buffer.from("echo:"), data as Buffer])) : ws.send(`echo:${String(data)}`))));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function refuse(res: ServerResponse, error: unknown): void {
  if (res.headersSent) res.destroy();
  else res.writeHead(400, { "content-type": "text/plain" }).end(`origin: ${String(error)}`);
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
