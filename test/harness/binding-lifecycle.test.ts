// The Floodgate service binding's results over a real binding in workerd: what a caller that stops waiting, disposes or never releases leaves behind.
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleWorker } from "./bundle";

const RULES = [
  { name: "window", match: { path: "/window/*" }, limit: 1, period: "2s" },
  { name: "slots", match: { path: "/slots/*" }, key: "ip", algorithm: "concurrency", limit: 1, slotTtl: "600ms" },
  { name: "long-slots", match: { path: "/long-slots/*" }, algorithm: "concurrency", limit: 1, slotTtl: "5s" },
  { name: "by-country", match: { path: "/country/*" }, key: "country", limit: 1, period: "1h" },
];

/** The caller: a Worker with the binding, whose routes each do one thing with a result and answer JSON. */
const CALLER = `
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name) => url.searchParams.get(name);
    switch (url.pathname) {
      case "/limit":
        return Response.json((await env.FLOODGATE.limit({ rule: q("rule"), key: q("key") })).success);
      case "/remaining":
        return Response.json((await env.FLOODGATE.peek({ rule: q("rule"), key: q("key") })).remaining);
      case "/stop-waiting": {
        // The caller stops waiting after 100 ms and answers; its request ends, and with it the call.
        const waited = env.FLOODGATE.blockUntilReady({ rule: "window", key: q("key"), timeout: "5s" });
        return Response.json(await Promise.race([waited.then(() => "admitted"), sleep(100).then(() => "gave up")]));
      }
      case "/dispose": {
        // Disposed without a release while the caller's request goes on.
        const held = await env.FLOODGATE.limit({ rule: "slots", key: q("key") });
        held[Symbol.dispose]();
        await sleep(3000);
        return Response.json(held.success);
      }
      case "/check-slot": {
        const { allowed } = await env.FLOODGATE.check(new Request("https://api.example.com/slots/x", { headers: { "CF-Connecting-IP": q("ip") } }));
        return Response.json(allowed);
      }
      case "/release-after-reset": {
        const options = { rule: "long-slots", key: q("key") };
        const first = await env.FLOODGATE.limit(options);
        await env.FLOODGATE.reset(options);
        const second = await env.FLOODGATE.limit(options);
        await first.release();
        const third = await env.FLOODGATE.limit(options);
        await second.release();
        return Response.json({ first: first.success, second: second.success, third: third.success });
      }
      case "/release-unawaited": {
        const held = await env.FLOODGATE.limit({ rule: "long-slots", key: q("key") });
        held.release();
        return Response.json(held.success);
      }
      case "/country/x":
        return Response.json((await env.FLOODGATE.check(new Request(request, { body: null }))).allowed);
    }
    return new Response("no such route", { status: 404 });
  },
};`;

let mf: Miniflare;

beforeAll(async () => {
  const bundle = await bundleWorker();
  mf = new Miniflare({
    workers: [
      { name: "caller", modules: true, script: CALLER, compatibilityDate: "2026-04-20", serviceBindings: { FLOODGATE: { name: "floodgate", entrypoint: "Floodgate" } } },
      {
        name: "floodgate",
        modules: true,
        scriptPath: bundle.path,
        compatibilityDate: "2026-04-20",
        bindings: { RATE_LIMIT_RULES: JSON.stringify(RULES), ORIGIN_URL: "none" },
        durableObjects: { LIMITER: { className: "RateLimiter", useSQLite: true } },
      },
    ],
  });
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
});

/** One request to the caller; `country` is the request.cf.country Cloudflare would give it. */
const call = async <T>(path: string, country?: "NL" | "FR"): Promise<T> => (await mf.dispatchFetch(`http://caller${path}`, country ? { cf: { country } } : {})).json() as Promise<T>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the service binding's results over RPC", () => {
  it("takes nothing for a blockUntilReady whose caller stopped waiting and ended its request", async () => {
    expect(await call("/limit?rule=window&key=stopped")).toBe(true);
    expect(await call("/stop-waiting?key=stopped")).toBe("gave up");
    await sleep(3_000);
    expect(await call("/remaining?rule=window&key=stopped")).toBe(1);
  });

  it("stops renewing a slot whose result the caller disposed, so it is free slotTtl later while the caller still runs", async () => {
    const disposing = call("/dispose?key=disposed");
    await sleep(1_500);
    expect(await call("/limit?rule=slots&key=disposed")).toBe(true);
    expect(await disposing).toBe(true);
  });

  it("frees a slot check admitted and its caller never released slotTtl after the caller's request ended", async () => {
    expect(await call("/check-slot?ip=198.51.100.80")).toBe(true);
    expect(await call("/check-slot?ip=198.51.100.80")).toBe(false);
    await sleep(1_500);
    expect(await call("/check-slot?ip=198.51.100.80")).toBe(true);
  });

  it("does not free the slot another call took after a reset when the reset slot's release comes late", async () => {
    expect(await call("/release-after-reset?key=reset")).toEqual({ first: true, second: true, third: false });
  });

  it("gives a slot back when the caller calls release without awaiting it and ends its request at once", async () => {
    expect(await call("/release-unawaited?key=unawaited")).toBe(true);
    // Well inside the slot's 5 s slotTtl, with room for a loaded machine: a release that never landed would still hold it.
    await sleep(1_500);
    expect(await call("/release-unawaited?key=unawaited")).toBe(true);
  });

  it("keys check's request by the request.cf the caller's copy carries across RPC", async () => {
    expect(await call("/country/x", "NL")).toBe(true);
    expect(await call("/country/x", "FR")).toBe(true);
    expect(await call("/country/x", "NL")).toBe(false);
  });
});
