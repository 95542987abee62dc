// concurrency from outside: a limit of 3 through wrangler dev never has a fourth request at a real slow origin, and slots come back on completion and abort.
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { useClusterFixture } from "./fixture";
import { useWranglerDevWithOrigin } from "./wrangler-dev";

const harness = useClusterFixture();

const rules = [
  { name: "conc-dev", match: { path: "/conc-dev/*" }, key: "global", algorithm: "concurrency", limit: 3 },
  { name: "conc-gone", match: { path: "/conc-gone/*" }, key: "global", algorithm: "concurrency", limit: 1 },
];

/** Sends until a request is admitted, every 50 ms; how long that took. */
async function admittedWithin(send: () => Promise<Response>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    const response = await send();
    await response.arrayBuffer();
    if (response.status === 200) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`not admitted within ${timeoutMs} ms`);
}

describe("a concurrency limit through wrangler dev", () => {
  const served = useWranglerDevWithOrigin("concurrency", rules);
  const inFlight = async (tag: string) => (await (await fetch(`${served.originUrl}/__origin/inflight?tag=${tag}`)).json()) as { current: number; max: number };

  it("never has a fourth request in flight at a slow origin, and admits again once responses are sent", async () => {
    const responses = await Promise.all(Array.from({ length: 10 }, (_, i) => served.dev.fetch(`/conc-dev/${i}?wait=600`)));
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(3);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(7);
    const denied = responses.find((r) => r.status === 429)!;
    expect(denied.headers.get("retry-after")).toBe("1");
    expect(denied.headers.get("ratelimit-policy")).toBe('"conc-dev";q=3;qu="concurrent-requests"');

    // The slots come back as the responses end: a second wave gets exactly three in again.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const again = await Promise.all(Array.from({ length: 6 }, (_, i) => served.dev.fetch(`/conc-dev/again-${i}?wait=300`)));
    await Promise.all(again.map((r) => r.arrayBuffer()));
    expect(again.filter((r) => r.status === 200)).toHaveLength(3);
    expect(await inFlight("conc-dev")).toEqual({ current: 0, max: 3 });
  }, 30_000);

  it("keeps the origin's Content-Length on a response it watches for the slot", async () => {
    // Identity: a client that accepts gzip gets a JSON body compressed on the way out, chunked, watched or not.
    const identity = { headers: { "accept-encoding": "identity" } };
    const direct = await fetch(`${served.originUrl}/conc-length/direct?sized`, identity);
    const watched = await served.dev.fetch("/conc-dev/length?sized", identity);
    const [sent, got] = [await direct.text(), await watched.text()];
    expect(watched.status).toBe(200);
    expect(watched.headers.get("content-length")).toBe(String(new TextEncoder().encode(got).length));
    expect(direct.headers.get("content-length")).toBe(String(new TextEncoder().encode(sent).length));
  }, 30_000);

  it("gives an aborted client's slot back when the origin has finished, since wrangler dev's proxy never passes the abort on", async () => {
    const client = new AbortController();
    const started = Date.now();
    await served.dev.fetch("/conc-gone/a?drip=2000", { signal: client.signal });
    await new Promise((resolve) => setTimeout(resolve, 300));
    client.abort();
    // The proxy buffers the body and goes on reading it for a client it no longer has: the Worker is still sending.
    expect((await served.dev.fetch("/conc-gone/held")).status).toBe(429);
    await admittedWithin(() => served.dev.fetch("/conc-gone/next"), 10_000);
    const back = Date.now() - started;
    // Back once the origin ended the body, 2 s after it began: nothing leaks until slotTtl, a minute on.
    expect(back).toBeGreaterThanOrEqual(2_000);
    expect(back).toBeLessThan(2_000 + 2_000);
  }, 30_000);
});

describe("a concurrency limit, a client resetting its connection mid-body", () => {
  it("gets its slot back at once, while the origin is still sending", async () => {
    const cluster = await harness.start({ isolates: 1, rules });
    const socket = connect(Number(cluster.fronts[0]!.url.port), "127.0.0.1");
    socket.on("error", () => {});
    const firstChunk = new Promise((resolve) => socket.once("data", resolve));
    socket.write("GET /conc-gone/reset?drip=5000 HTTP/1.1\r\nHost: floodgate.test\r\n\r\n");
    await firstChunk;
    expect((await cluster.fetch(0, "/conc-gone/denied")).status).toBe(429);
    // A reset, not a FIN: local workerd takes a half-closed connection for a client still waiting.
    socket.resetAndDestroy();
    const waited = await admittedWithin(() => cluster.fetch(0, "/conc-gone/next"), 4_000);
    expect(waited).toBeLessThan(2_000);
  }, 30_000);
});
