import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { forgetLocal, localView } from "../../src/fast";
import { metrics } from "../../src/metrics/metrics";
import { frozenStart } from "../helpers/clock";
import { dispatch, originLog, send, statuses } from "../helpers/worker";

const get = (path: string, ip: string) => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });
const flaky = (objectName: string) => env.FLAKY.get(env.FLAKY.idFromName(objectName));
const withFlaky = { LIMITER: env.FLAKY as unknown as Env["LIMITER"] };
const withSlow = { LIMITER: env.SLOW as unknown as Env["LIMITER"] };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("when the Durable Object fails", () => {
  it("lets requests through with onError allow", async () => {
    await flaky("f-allow/192.0.2.80").fail(100, "before");
    const rules = [{ name: "f-allow", limit: 1, period: "1m", onError: "allow" }];
    expect(await statuses(3, () => get("/fault-allow/x", "192.0.2.80"), { rules, ...withFlaky })).toEqual([200, 200, 200]);
    expect(await originLog("fault-allow")).toHaveLength(3);
  });

  it("denies requests with onError deny, never reaching the origin", async () => {
    await flaky("f-deny/192.0.2.81").fail(100, "before");
    const rules = [{ name: "f-deny", limit: 10, period: "1m", onError: "deny" }];
    const res = await send(get("/fault-deny/x", "192.0.2.81"), { rules, ...withFlaky });
    expect(res.status).toBe(429);
    expect(res.headers.get("Retry-After")).toBe("1");
    expect(await originLog("fault-deny")).toEqual([]);
  });

  it("limits from the isolate's own counters with onError local, the default", async () => {
    const rules = [{ name: "f-local", limit: 2, period: "1m" }];
    // Another key's object has answered this isolate for the rule: it is not a cold start.
    expect((await send(get("/fl2/x", "192.0.2.89"), { rules, ...withFlaky })).status).toBe(200);
    await flaky("f-local/192.0.2.82").fail(100, "before");
    expect(await statuses(4, () => get("/fl2/x", "192.0.2.82"), { rules, ...withFlaky })).toEqual([200, 200, 429, 429]);
  });

  it("refuses with onError local while none of a strict rule's objects has answered this isolate", async () => {
    await flaky("f-cold-strict/192.0.2.116").fail(100, "before");
    const rules = [{ name: "f-cold-strict", limit: 4, period: "1m" }];
    expect(await statuses(2, () => get("/fcs/x", "192.0.2.116"), { rules, ...withFlaky })).toEqual([429, 429]);
  });

  it("counts itself alone with onError local once a strict rule's objects have left this isolate unanswered for 30 s", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = frozenStart();
    vi.setSystemTime(start);
    await flaky("f-cold-strict-outage/192.0.2.117").fail(100, "before");
    const rules = [{ name: "f-cold-strict-outage", limit: 4, period: "1m" }];
    const refused = await statuses(2, () => get("/fcso/x", "192.0.2.117"), { rules, ...withFlaky });
    vi.setSystemTime(start + 30_000);
    const alone = await statuses(6, () => get("/fcso/x", "192.0.2.117"), { rules, ...withFlaky });
    expect(refused).toEqual([429, 429]);
    expect(alone).toEqual([200, 200, 200, 200, 429, 429]);
  });

  it("goes on with onError local from the units a strict object last said were left, not from a full quota on top of them", async () => {
    const rules = [{ name: "f-local-heard", limit: 3, period: "1m" }];
    expect((await send(get("/flh/x", "192.0.2.87"), { rules, ...withFlaky })).status).toBe(200);
    await flaky("f-local-heard/192.0.2.87").fail(100, "before");
    expect(await statuses(4, () => get("/flh/x", "192.0.2.87"), { rules, ...withFlaky })).toEqual([200, 200, 429, 429]);
  });

  it("never hands out locally again the units a strict object counted between its failures", async () => {
    const object = flaky("f-local-flap/192.0.2.88");
    // A timeout a loaded machine's healthy call fits in (at 50 ms one timed out in CI and the local fallback denied it); its
    // breaker's backoff, from the timeout, is over by the sleep below.
    const rules = [{ name: "f-local-flap", limit: 4, period: "1m", timeout: "250ms" }];
    const burst = (count: number) => statuses(count, () => get("/flf/x", "192.0.2.88"), { rules, ...withFlaky });
    expect(await burst(1)).toEqual([200]);
    await object.fail(100, "before");
    expect(await burst(4)).toEqual([200, 200, 200, 429]);
    await object.fail(0, "before");
    await sleep(1_100);
    expect(await burst(1)).toEqual([200]);
    await object.fail(100, "before");
    expect(await burst(3)).toEqual([429, 429, 429]);
  });

  it("gives a strict key reset through the admin API its full quota in the local fallback, not what its object said before the reset", async () => {
    const token = "faults-admin-token-0123456789";
    const rules = [{ name: "f-local-reset", limit: 3, period: "1m" }];
    const bindings = { rules, ADMIN_TOKEN: token, ...withFlaky };
    const object = flaky("f-local-reset/192.0.2.90");
    const burst = (count: number) => statuses(count, () => get("/flr/x", "192.0.2.90"), bindings);
    expect(await burst(3)).toEqual([200, 200, 200]);
    await object.fail(100, "before");
    expect(await burst(1)).toEqual([429]);
    const url = "http://floodgate.test/__floodgate/state?rule=f-local-reset&key=192.0.2.90";
    expect((await send(new Request(url, { method: "DELETE", headers: { Authorization: `Bearer ${token}` } }), bindings)).status).toBe(200);
    expect(await burst(4)).toEqual([200, 200, 200, 429]);
  });

  it("counts each failure in the metrics", async () => {
    await flaky("f-count/192.0.2.83").fail(100, "before");
    const before = metrics.value("floodgate_errors_total", { kind: "durable_object" });
    await send(get("/fcnt/x", "192.0.2.83"), { rules: [{ name: "f-count", limit: 5, period: "1m" }], ...withFlaky });
    expect(metrics.value("floodgate_errors_total", { kind: "durable_object" })).toBe(before + 1);
  });

  it("answers within the timeout when the object is slow", async () => {
    const rules = [{ name: "f-slow", limit: 5, period: "1m", timeout: "100ms", onError: "allow" }];
    const started = Date.now();
    const { response, settled } = await dispatch(get("/fs/x", "192.0.2.84"), { rules, ...withSlow });
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2_000);
    await settled;
  });

  it("answers within the timeout in fast mode too", async () => {
    const rules = [{ name: "f-slow-fast", mode: "fast", limit: 5, period: "1m", timeout: "100ms", onError: "deny" }];
    const started = Date.now();
    const { response, settled } = await dispatch(get("/fsf/x", "192.0.2.85"), { rules, ...withSlow });
    expect(response.status).toBe(429);
    expect(Date.now() - started).toBeLessThan(2_000);
    await settled;
    // Its object stays hung: forgotten here, or each later test's sweep (once a second) would wait 3 s on the release of its lease there.
    forgetLocal(withSlow.LIMITER, "f-slow-fast/192.0.2.85");
  });

  it("recovers when the object answers again", async () => {
    await flaky("f-recover/192.0.2.86").fail(2, "before");
    // A timeout a loaded machine's healthy call fits in (at 50 ms, a call timed out there would be let through by onError
    // allow, and the fourth request too); the breaker's backoff after the two failures, one timeout, is over by the sleep.
    const rules = [{ name: "f-recover", limit: 3, period: "1m", timeout: "250ms", onError: "allow" }];
    expect(await statuses(2, () => get("/fr/x", "192.0.2.86"), { rules, ...withFlaky })).toEqual([200, 200]);
    await sleep(300);
    expect(await statuses(4, () => get("/fr/x", "192.0.2.86"), { rules, ...withFlaky })).toEqual([200, 200, 200, 429]);
  });

  it("leaves an object alone after two failures in a row, deciding by onError at once", async () => {
    await flaky("f-breaker/192.0.2.88").fail(100, "before");
    const rules = [{ name: "f-breaker", limit: 5, period: "1m", timeout: "10s", onError: "deny" }];
    const calls = () => metrics.value("floodgate_durable_object_calls_total", { method: "decide" });
    expect(await statuses(2, () => get("/fbk/x", "192.0.2.88"), { rules, ...withFlaky })).toEqual([429, 429]);
    const before = calls();
    expect(await statuses(3, () => get("/fbk/x", "192.0.2.88"), { rules, ...withFlaky })).toEqual([429, 429, 429]);
    expect(calls()).toBe(before);
  });

  it("answers at once while the breaker is open, instead of waiting out a hung object's timeout", async () => {
    const rules = [{ name: "f-hung", limit: 5, period: "1m", timeout: "1s", onError: "allow" }];
    const timedOut = await Promise.all([1, 2].map(() => dispatch(get("/fh/x", "192.0.2.89"), { rules, ...withSlow })));
    const started = Date.now();
    const { response, settled } = await dispatch(get("/fh/x", "192.0.2.89"), { rules, ...withSlow });
    expect(response.status).toBe(200);
    // A timeout long beside a proxied request, so a loaded machine cannot make an answer at once look like a waited-out timeout.
    expect(Date.now() - started).toBeLessThan(1_000);
    // The first call is still stalled in the background; let it end before the test does.
    await Promise.all([settled, ...timedOut.map((t) => t.settled)]);
  }, 10_000);
});

describe("when many of a rule's objects fail", () => {
  const ips = ["192.0.2.101", "192.0.2.102", "192.0.2.103", "192.0.2.104"];

  it("decides every key of a strict rule by onError at once after four of its keys failed in a row", async () => {
    for (const ip of ips) await flaky(`f-outage/${ip}`).fail(100, "before");
    const rules = [{ name: "f-outage", limit: 5, period: "1m", timeout: "10s", onError: "deny" }];
    for (const ip of ips) expect((await send(get("/fo/x", ip), { rules, ...withFlaky })).status).toBe(429);
    const calls = () => metrics.value("floodgate_durable_object_calls_total", { method: "decide" });
    const before = calls();
    // This key's object is healthy, but it is not asked: the rule's objects are failing.
    expect((await send(get("/fo/x", "192.0.2.105"), { rules, ...withFlaky })).status).toBe(429);
    expect(calls()).toBe(before);
  });

  it("does the same for a fast rule's syncs", async () => {
    for (const ip of ips) await flaky(`f-outage-fast/${ip}`).fail(100, "before");
    const rules = [{ name: "f-outage-fast", mode: "fast", limit: 5, period: "1m", timeout: "10s", onError: "deny" }];
    for (const ip of ips) expect((await send(get("/fof/x", ip), { rules, ...withFlaky })).status).toBe(429);
    const syncs = () => metrics.value("floodgate_durable_object_calls_total", { method: "sync" });
    const before = syncs();
    expect((await send(get("/fof/x", "192.0.2.105"), { rules, ...withFlaky })).status).toBe(429);
    expect(syncs()).toBe(before);
  });
});

describe("when the origin fails", () => {
  it("answers 502 problem+json when the origin cannot be reached, and counts it", async () => {
    const before = metrics.value("floodgate_errors_total", { kind: "origin" });
    // Port 1 on loopback: nothing listens, so the connection is refused.
    const res = await send(get("/fo/x", "192.0.2.87"), { rules: [{ name: "f-origin", limit: 5, period: "1m" }], ORIGIN_URL: "http://127.0.0.1:1" });
    expect(res.status).toBe(502);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ type: "about:blank", status: 502, title: "Bad Gateway" });
    expect(metrics.value("floodgate_errors_total", { kind: "origin" })).toBe(before + 1);
  });
});

describe("fast mode when syncs fail", () => {
  it("refuses with onError local while none of a fast rule's objects has answered this isolate", async () => {
    await flaky("f-cold-fast/192.0.2.112").fail(100, "before");
    const rules = [{ name: "f-cold-fast", mode: "fast", limit: 4, period: "1m" }];
    expect(await statuses(2, () => get("/fcf/x", "192.0.2.112"), { rules, ...withFlaky })).toEqual([429, 429]);
  });

  it("counts itself alone with onError local once a fast rule's objects have left this isolate unanswered for 30 s", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = frozenStart();
    vi.setSystemTime(start);
    await flaky("f-cold-outage/192.0.2.115").fail(100, "before");
    const rules = [{ name: "f-cold-outage", mode: "fast", limit: 4, period: "1m" }];
    const refused = await statuses(2, () => get("/fco/x", "192.0.2.115"), { rules, ...withFlaky });
    vi.setSystemTime(start + 30_000);
    const alone = await statuses(6, () => get("/fco/x", "192.0.2.115"), { rules, ...withFlaky });
    expect(refused).toEqual([429, 429]);
    expect(alone).toEqual([200, 200, 200, 200, 429, 429]);
  });

  it("gives a new key of a fast rule whose objects have answered its share of the limit with onError local", async () => {
    const rules = [{ name: "f-share-fast", mode: "fast", limit: 4, period: "1m" }];
    expect((await send(get("/fsf/x", "192.0.2.113"), { rules, ...withFlaky })).status).toBe(200);
    await flaky("f-share-fast/192.0.2.114").fail(100, "before");
    expect(await statuses(6, () => get("/fsf/x", "192.0.2.114"), { rules, ...withFlaky })).toEqual([200, 200, 200, 200, 429, 429]);
  });

  it("counts a token bucket's outage admissions at the times they went: a key used at its rate through an outage is free when the object is back", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = frozenStart();
    vi.setSystemTime(start);
    const ip = "192.0.2.116";
    const rules = [{ name: "f-outage-tb", mode: "fast", algorithm: "token-bucket", limit: 60, period: "1m", onError: "allow" }];
    const request = () => get("/fot/x", ip);
    expect((await send(request(), { rules, ...withFlaky })).status).toBe(200);
    await flaky(`f-outage-tb/${ip}`).fail(10_000, "before");
    // Three minutes at one a second, the rule's rate, while every sync fails.
    for (let s = 1; s <= 180; s++) {
      vi.setSystemTime(start + s * 1_000);
      expect((await send(request(), { rules, ...withFlaky })).status).toBe(200);
    }
    await flaky(`f-outage-tb/${ip}`).fail(0, "before");
    // Past the longest backoff: the next request syncs, and the object counts the outage's 180 units.
    vi.setSystemTime(start + 212_000);
    const after = await statuses(3, request, { rules, ...withFlaky });
    const { remaining } = await flaky(`f-outage-tb/${ip}`).peek({ algorithm: "token-bucket", limit: 60, periodMs: 60_000, burst: 60, buckets: 1 });
    expect(after).toEqual([200, 200, 200]);
    expect(remaining).toBeGreaterThan(40);
  });

  it("gives back what onError admitted for a request another rule denied: the object never counts it once it is back", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = frozenStart();
    vi.setSystemTime(start);
    const ip = "192.0.2.117";
    const rules = [
      { name: "f-gb-fast", mode: "fast", algorithm: "fixed-window", limit: 2, period: "1h", onError: "allow" },
      { name: "f-gb-other", key: "header:x-b", limit: 1, period: "1h" },
    ];
    const request = (b: string) => new Request("http://floodgate.test/fgb/x", { headers: { "CF-Connecting-IP": ip, "x-b": b } });
    await flaky(`f-gb-fast/${ip}`).fail(100, "before");
    expect((await send(request("1"), { rules, ...withFlaky })).status).toBe(200);
    // Admitted by the fast rule's onError, denied by the other rule: it never reached the origin.
    expect((await send(request("1"), { rules, ...withFlaky })).status).toBe(429);
    await flaky(`f-gb-fast/${ip}`).fail(0, "before");
    // Past the longest backoff: the next request syncs, and the object counts what the outage admitted.
    vi.setSystemTime(start + 40_000);
    expect((await send(request("2"), { rules, ...withFlaky })).status).toBe(200);
    expect((await send(request("3"), { rules, ...withFlaky })).status).toBe(429);
  });

  it("leaves a failing object alone while it backs off, deciding by onError at once", async () => {
    await flaky("f-backoff/192.0.2.91").fail(100, "before");
    const rules = [{ name: "f-backoff", mode: "fast", limit: 5, period: "1m", sync: "10s", onError: "allow" }];
    const syncs = () => metrics.value("floodgate_durable_object_calls_total", { method: "sync" });
    expect((await send(get("/fbo/x", "192.0.2.91"), { rules, ...withFlaky })).status).toBe(200);
    const before = syncs();
    expect(await statuses(5, () => get("/fbo/x", "192.0.2.91"), { rules, ...withFlaky })).toEqual([200, 200, 200, 200, 200]);
    expect(syncs()).toBe(before);
  });

  // onError deny: every admission then comes from a lease, so the object's books must balance exactly.
  const rules = [{ name: "f-sync", mode: "fast", limit: 40, period: "1h", sync: "50ms", onError: "deny" }];
  const policy = { algorithm: "sliding-window", limit: 40, periodMs: 3_600_000, burst: 40, buckets: 1 } as const;

  it("keeps deciding from its lease while syncs fail, and counts nothing twice once they succeed", async () => {
    const ip = "192.0.2.90";
    const request = () => get("/fsync/x", ip);
    let admitted = (await statuses(3, request, { rules, ...withFlaky })).filter((s) => s === 200).length;
    // Each of the next two syncs is applied by the object, but its answer is lost: the isolate retries it.
    await flaky(`f-sync/${ip}`).fail(2, "after");
    for (let round = 0; round < 6; round++) {
      admitted += (await statuses(3, request, { rules, ...withFlaky })).filter((s) => s === 200).length;
      await sleep(60);
    }
    const view = localView(withFlaky.LIMITER, `f-sync/${ip}`)!;
    const { remaining } = await flaky(`f-sync/${ip}`).peek(policy);
    expect(admitted).toBeGreaterThan(10);
    expect(remaining + admitted + view.leased + view.returning).toBe(40);
  });

  it("counts and logs a background sync that fails, naming the rule, while the lease decides", async () => {
    const ip = "192.0.2.91";
    const request = () => get("/fsync/x", ip);
    expect(await statuses(2, request, { rules, ...withFlaky })).toEqual([200, 200]);
    await flaky(`f-sync/${ip}`).fail(100, "before");
    await sleep(60);
    const before = metrics.value("floodgate_errors_total", { kind: "sync" });
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const { response, settled } = await dispatch(request(), { rules, ...withFlaky });
    await settled;

    expect(response.status).toBe(200);
    expect(metrics.value("floodgate_errors_total", { kind: "sync" })).toBe(before + 1);
    expect(lines).toContainEqual({ event: "error", kind: "sync", rule: "f-sync", message: "injected: the object is unavailable" });
  });

  it("counts a failed background sync once, however many requests came while it was on its way", async () => {
    const ip = "192.0.2.92";
    const roomy = [{ name: "f-sync-roomy", mode: "fast", limit: 100_000, period: "1h", sync: "50ms", onError: "deny" }];
    const request = () => get("/fsync/x", ip);
    // A key far from its limit leases more than its demand: the concurrent requests below all decide from the lease, none waits on the sync.
    expect(await statuses(12, request, { rules: roomy, ...withFlaky })).toEqual(Array(12).fill(200));
    await flaky(`f-sync-roomy/${ip}`).fail(1, "before");
    await sleep(60);
    const before = metrics.value("floodgate_errors_total", { kind: "sync" });
    const sent = await Promise.all(Array.from({ length: 8 }, () => dispatch(request(), { rules: roomy, ...withFlaky })));
    await Promise.all(sent.map((s) => s.settled));
    expect(sent.map((s) => s.response.status)).toEqual(Array(8).fill(200));
    expect(metrics.value("floodgate_errors_total", { kind: "sync" })).toBe(before + 1);
  });
});
