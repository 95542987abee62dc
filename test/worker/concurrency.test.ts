// concurrency through the Worker, the real object and a real slow origin: at most the limit in flight, slots back on completion, origin failure and client abort.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/env";
import { rateLimit } from "../../src/hono";
import { limiter } from "../../src/lib";
import { metrics } from "../../src/metrics/metrics";
import { dispatch, originUrl } from "../helpers/worker";

const get = (path: string, ip: string, signal?: AbortSignal) =>
  new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip }, redirect: "manual", ...(signal ? { signal } : {}) });

const slots = (name: string, limit: number) => [{ name, algorithm: "concurrency", limit, slotTtl: "1m" }];

/**
 * Sends one request through floodgate and reads its body to the end, as a client does, then waits
 * for its waitUntil work: a concurrency slot is given back only once the body has been sent.
 */
async function send(request: Request, bindings: { rules: unknown }): Promise<Response & { text(): Promise<string> }> {
  const { response, settled } = await dispatch(request, bindings);
  const body = await response.text();
  await settled;
  return Object.assign(response, { text: async () => body });
}

/** How many requests under `/<tag>/` the origin is serving now, and at most so far. */
async function inFlight(tag: string): Promise<{ current: number; max: number }> {
  return (await fetch(`${originUrl()}/__origin/inflight?tag=${tag}`)).json();
}

describe("concurrency through the Worker", () => {
  it("never has more than the limit in flight at a slow origin, and admits again once responses are sent", async () => {
    const tag = "conc-limit";
    const rules = slots(tag, 3);
    const sent = await Promise.all(Array.from({ length: 6 }, (_, i) => dispatch(get(`/${tag}/${i}?wait=300`, "192.0.2.60"), { rules })));
    await Promise.all(sent.map(async ({ response, settled }) => {
      await response.arrayBuffer();
      await settled;
    }));
    expect(sent.map((s) => s.response.status).sort()).toEqual([200, 200, 200, 429, 429, 429]);
    expect((await inFlight(tag)).max).toBe(3);

    const again = await Promise.all(Array.from({ length: 4 }, (_, i) => send(get(`/${tag}/again-${i}?wait=100`, "192.0.2.60"), { rules })));
    expect(again.map((r) => r.status).sort()).toEqual([200, 200, 200, 429]);
    expect((await inFlight(tag)).max).toBe(3);
  });

  it("admits again once a burst its concurrency rule mostly denied is over: the rate rule's units came back, and so does its quota", async () => {
    const tag = "conc-mixed";
    const rules = [
      { name: "conc-mixed-slots", match: { path: `/${tag}/*` }, algorithm: "concurrency", limit: 2, slotTtl: "1m" },
      { name: "conc-mixed-rate", match: { path: `/${tag}/*` }, limit: 5, period: "1m" },
    ];
    const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => dispatch(get(`/${tag}/${i}?wait=300`, "192.0.2.61"), { rules })));
    await Promise.all(burst.map(async ({ response, settled }) => {
      await response.arrayBuffer();
      await settled;
    }));
    expect(burst.filter((s) => s.response.status === 200)).toHaveLength(2);

    const next = await send(get(`/${tag}/after`, "192.0.2.61"), { rules });
    expect(next.status).toBe(200);
  });

  it("holds the slot until the body has been sent, not just until the origin answered", async () => {
    const tag = "conc-body";
    const rules = slots(tag, 1);
    const { response, settled } = await dispatch(get(`/${tag}/slow?drip=400`, "192.0.2.61"), { rules });
    expect(response.status).toBe(200);
    expect((await send(get(`/${tag}/second`, "192.0.2.61"), { rules })).status).toBe(429);
    expect(await response.text()).toBe("first\nlast\n");
    await settled;
    expect((await send(get(`/${tag}/third`, "192.0.2.61"), { rules })).status).toBe(200);
  });

  it("keeps the slot of a response still being sent past slotTtl, and frees it once the body has been sent", async () => {
    const tag = "conc-long";
    // Each renewal may land up to two thirds of slotTtl late: with 600 ms, a loaded machine's object calls had let the slot lapse.
    const rules = [{ name: tag, algorithm: "concurrency", limit: 1, slotTtl: "1s" }];
    // The body takes 4 s: the request below, past two slotTtls and their renewals, has 1.8 s to be decided while it is
    // still being sent.
    const { response, settled } = await dispatch(get(`/${tag}/slow?drip=4000`, "192.0.2.66"), { rules });
    expect(response.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    expect((await send(get(`/${tag}/second`, "192.0.2.66"), { rules })).status).toBe(429);
    expect(await response.text()).toBe("first\nlast\n");
    await settled;
    expect((await send(get(`/${tag}/third`, "192.0.2.66"), { rules })).status).toBe(200);
  });

  it("denies a client holding its slots from the isolate's cache until Retry-After, asking no object under any rule, and asks again once this isolate gives a slot back", async () => {
    const tag = "conc-cached";
    const rules = [
      { name: `${tag}-slots`, match: { path: `/${tag}/*` }, algorithm: "concurrency", limit: 1, slotTtl: "1m" },
      { name: `${tag}-rate`, match: { path: `/${tag}/*` }, limit: 100, period: "1m" },
    ];
    const { response, settled } = await dispatch(get(`/${tag}/held?drip=400`, "192.0.2.67"), { rules });
    expect(response.status).toBe(200);
    expect((await send(get(`/${tag}/first-denied`, "192.0.2.67"), { rules })).status).toBe(429);
    const calls = () => ["decide", "refund"].reduce((sum, method) => sum + metrics.value("floodgate_durable_object_calls_total", { method }), 0);
    const before = calls();
    const again = await Promise.all(Array.from({ length: 5 }, (_, i) => send(get(`/${tag}/again-${i}`, "192.0.2.67"), { rules })));
    expect(again.map((r) => r.status)).toEqual([429, 429, 429, 429, 429]);
    expect(calls()).toBe(before);
    await response.arrayBuffer();
    await settled;
    expect((await send(get(`/${tag}/after`, "192.0.2.67"), { rules })).status).toBe(200);
  });

  it("gives the slot back when the origin fails", async () => {
    const tag = "conc-fail";
    const rules = slots(tag, 1);
    expect((await send(get(`/${tag}/broken?fail=1`, "192.0.2.62"), { rules })).status).toBe(502);
    expect((await send(get(`/${tag}/next`, "192.0.2.62"), { rules })).status).toBe(200);
  });

  it("gives the slot back when the client goes away mid-body, while the origin is still sending", async () => {
    const tag = "conc-abort";
    const rules = slots(tag, 1);
    const client = new AbortController();
    const { response, settled } = await dispatch(get(`/${tag}/gone?drip=3000`, "192.0.2.63", client.signal), { rules });
    const reader = response.body!.getReader();
    await reader.read();
    client.abort();
    await settled;
    expect((await send(get(`/${tag}/next`, "192.0.2.63"), { rules })).status).toBe(200);
    await reader.cancel();
  });

  it("passes the body it watches through unchanged, and a response without one gives its slot back at once", async () => {
    const tag = "conc-body-bytes";
    const rules = slots(tag, 1);
    const body = await (await send(get(`/${tag}/x`, "192.0.2.64"), { rules })).text();
    expect(JSON.parse(body)).toMatchObject({ ok: true });
    const head = new Request(`http://floodgate.test/${tag}/head`, { method: "HEAD", headers: { "CF-Connecting-IP": "192.0.2.64" }, redirect: "manual" });
    const { response, settled } = await dispatch(head, { rules });
    expect(response.body).toBeNull();
    await settled;
    expect((await send(get(`/${tag}/after`, "192.0.2.64"), { rules })).status).toBe(200);
  });

  it("sends RateLimit-Policy with qu=\"concurrent-requests\", and Retry-After 1 on a denial", async () => {
    const tag = "conc-headers";
    const rules = slots(tag, 1);
    const { response, settled } = await dispatch(get(`/${tag}/held?drip=200`, "192.0.2.65"), { rules });
    expect(response.headers.get("RateLimit-Policy")).toBe(`"${tag}";q=1;qu="concurrent-requests"`);
    expect(response.headers.get("RateLimit")).toBe(`"${tag}";r=0`);
    const denied = await send(get(`/${tag}/denied`, "192.0.2.65"), { rules });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Retry-After")).toBe("1");
    expect(denied.headers.get("RateLimit")).toBe(`"${tag}";r=0;t=1`);
    await response.arrayBuffer();
    await settled;
  });

  it("reports a rate rule's wait, not a concurrency rule's r=0 without t, when both have none left on an allowed response", async () => {
    const tag = "conc-tie";
    // The slot comes back when this response ends; the window's unit only in 30 s, which the client must be told.
    const rules = [...slots(tag, 1), { name: `${tag}-rate`, limit: 1, period: "30s" }];
    const response = await send(get(`/${tag}/x`, "192.0.2.66"), { rules });
    expect(response.headers.get("RateLimit")).toMatch(new RegExp(`^"${tag}-rate";r=0;t=3[01]$`));
    const denied = await send(get(`/${tag}/x`, "192.0.2.66"), { rules });
    expect(denied.headers.get("RateLimit")).toBe(`"${tag}-rate";r=0;t=${denied.headers.get("Retry-After")}`);
  });
});

describe("concurrency from code", () => {
  const namespace = () => (env as unknown as Env).LIMITER;

  it("gives the library's caller a release that frees its slot once, however often it is called", async () => {
    const uploads = limiter(namespace(), { name: "conc-lib", algorithm: "concurrency", limit: 2 });
    const [a, b] = [await uploads.limit("k"), await uploads.limit("k")];
    expect([a.success, b.success, (await uploads.limit("k")).success]).toEqual([true, true, false]);
    await a.release!();
    await a.release!();
    expect((await uploads.limit("k")).success).toBe(true);
    expect((await uploads.limit("k")).success).toBe(false);
  });

  it("gives no release where nothing was taken: a denial, or another algorithm", async () => {
    const one = limiter(namespace(), { name: "conc-lib-none", algorithm: "concurrency", limit: 1 });
    expect((await one.limit("k")).release).toBeTypeOf("function");
    expect((await one.limit("k")).release).toBeUndefined();
    expect((await limiter(namespace(), { name: "conc-lib-window", limit: 1, period: "1m" }).limit("k")).release).toBeUndefined();
  });

  it("frees a slot the Hono middleware took once the handler's response has been sent", async () => {
    const app = new Hono<{ Bindings: Env }>()
      .use("/h/*", rateLimit({ binding: "LIMITER", rule: { name: "conc-hono", algorithm: "concurrency", limit: 1 }, key: () => "k" }))
      .get("/h/*", async () => fetch(`${originUrl()}/conc-hono/x?drip=200`));
    const call = async () => {
      const ctx = createExecutionContext();
      return { response: await app.fetch(new Request("http://app.test/h/1"), env, ctx), settled: waitOnExecutionContext(ctx) };
    };
    const first = await call();
    expect(first.response.status).toBe(200);
    expect((await call()).response.status).toBe(429);
    expect(await first.response.text()).toBe("first\nlast\n");
    await first.settled;
    expect((await call()).response.status).toBe(200);
  });
});
