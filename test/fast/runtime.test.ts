import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { decideFast, localView, refundFast, type FastContext } from "../../src/fast";
import { metrics } from "../../src/metrics/metrics";
import { TimeoutError } from "../../src/strict/timeout";
import { policyOf } from "../../src/config/policy";
import { frozenStart } from "../helpers/clock";
import { delayedSyncs } from "../helpers/namespace";
import { rule } from "../helpers/rules";
import { originLog, send } from "../helpers/worker";

const get = (path: string, ip = "192.0.2.1") => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const syncs = () => metrics.value("floodgate_durable_object_calls_total", { method: "sync" });
const peek = (objectName: string, policy: Parameters<ReturnType<typeof env.LIMITER.get>["peek"]>[0]) =>
  env.LIMITER.get(env.LIMITER.idFromName(objectName)).peek(policy);

afterEach(() => vi.useRealTimers());

/**
 * Twelve requests at a new key of 10 a minute, on a frozen clock, as calls through a service binding
 * come: the first starts the key's sync, the rest join it and ask again together. Returns a denied one.
 */
async function crowdJoiningASync(name: string) {
  vi.useFakeTimers({ toFake: ["Date"] });
  const T0 = frozenStart();
  vi.setSystemTime(T0);
  const context: FastContext = { namespace: env.LIMITER, waitUntil: () => undefined };
  const fast = rule({ name, mode: "fast", aggregate: undefined, limit: 10, periodMs: 60_000, buckets: 60 });
  const first = decideFast(context, fast, `${name}/k`, 1);
  await sleep(0);
  const crowd = await Promise.all([first, ...Array.from({ length: 11 }, () => decideFast(context, fast, `${name}/k`, 1))]);
  const denied = crowd.filter((d) => !d.allowed);
  expect(denied).toHaveLength(2);
  return { T0, context, fast, denied: denied[0]! };
}

describe("fast mode in the real runtime", () => {
  it("decides a known key in the isolate, without an object call per request", async () => {
    const rules = [{ name: "fast-local", mode: "fast", limit: 1_000, period: "1m" }];
    await send(get("/fl/0"), { rules });
    const before = syncs();
    const local = () => metrics.value("floodgate_local_decisions_total", { rule: "fast-local" });
    const localBefore = local();
    for (let i = 0; i < 30; i++) expect((await send(get(`/fl/${i}`), { rules })).status).toBe(200);
    expect(local() - localBefore).toBeGreaterThanOrEqual(25);
    expect(syncs() - before).toBeLessThan(6);
  });

  it("admits exactly the limit, then denies from the object's answer", async () => {
    const rules = [{ name: "fast-exact", mode: "fast", limit: 5, period: "1m" }];
    const statuses = [];
    for (let i = 0; i < 12; i++) statuses.push((await send(get("/fast-exact/x"), { rules })).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
    expect(await originLog("fast-exact")).toHaveLength(5);
  });

  it("admits exactly the limit out of 100 concurrent requests", async () => {
    const rules = [{ name: "fast-conc", mode: "fast", limit: 20, period: "1m" }];
    const responses = await Promise.all(Array.from({ length: 100 }, () => send(get("/fc/x"), { rules })));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(20);
  });

  it("keeps a key's state when its rule switches from strict to fast", async () => {
    const strict = [{ name: "switch", limit: 5, period: "1m" }];
    const fast = [{ name: "switch", mode: "fast", limit: 5, period: "1m" }];
    for (let i = 0; i < 3; i++) await send(get("/sw/x", "192.0.2.30"), { rules: strict });
    const after = [];
    for (let i = 0; i < 4; i++) after.push((await send(get("/sw/x", "192.0.2.30"), { rules: fast })).status);
    expect(after).toEqual([200, 200, 429, 429]);
  });

  it("gives back an evicted key's unspent lease", async () => {
    const rules = [{ name: "evict", mode: "fast", limit: 50, period: "1h", sync: "10s" }];
    const policy = { algorithm: "sliding-window", limit: 50, periodMs: 3_600_000, burst: 50, buckets: 1 } as const;
    for (let i = 0; i < 5; i++) await send(get("/ev/a", "192.0.2.40"), { rules, FAST_MAX_KEYS: "1" });
    expect(localView(env.LIMITER, "evict/192.0.2.40")?.leased).toBeGreaterThan(0);
    const evictions = metrics.value("floodgate_key_evictions_total");
    await send(get("/ev/b", "192.0.2.41"), { rules, FAST_MAX_KEYS: "1" });
    expect(metrics.value("floodgate_key_evictions_total")).toBe(evictions + 1);
    expect((await peek("evict/192.0.2.40", policy)).remaining).toBe(45);
  });

  it("serves a key again after it was evicted and comes back", async () => {
    const rules = [{ name: "comeback", mode: "fast", limit: 1_000, period: "1m" }];
    const bindings = { rules, FAST_MAX_KEYS: "1" };
    const statuses = [];
    for (const ip of ["192.0.2.60", "192.0.2.60", "192.0.2.61", "192.0.2.60", "192.0.2.60", "192.0.2.61", "192.0.2.60"]) {
      statuses.push((await send(get("/cb/x", ip), bindings)).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200]);
  });

  it("syncs again after the interval and returns what it did not spend", async () => {
    const rules = [{ name: "resync", mode: "fast", limit: 100, period: "1h", sync: "50ms" }];
    const policy = { algorithm: "sliding-window", limit: 100, periodMs: 3_600_000, burst: 100, buckets: 1 } as const;
    let admitted = 0;
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 5; i++) if ((await send(get("/rs/x", "192.0.2.50"), { rules })).status === 200) admitted++;
      await sleep(120);
    }
    const view = localView(env.LIMITER, "resync/192.0.2.50")!;
    const { remaining } = await peek("resync/192.0.2.50", policy);
    expect(admitted).toBe(20);
    expect(remaining + admitted + view.leased + view.returning).toBe(100);
  });

  it("answers a request within the rule's timeout when the sync it joined does not cover it", async () => {
    const pending: Promise<unknown>[] = [];
    // Each sync answered 700 ms on, 300 ms inside the timeout: room for a loaded machine to answer the first in time
    // (at 250 ms of 300, the first request itself timed out), while a second sync can never answer within what is left.
    const context: FastContext = { namespace: delayedSyncs(() => sleep(700)), waitUntil: (p) => void pending.push(p) };
    const fast = rule({ name: "one-deadline", mode: "fast", aggregate: undefined, limit: 1_000, periodMs: 3_600_000, timeoutMs: 1_000 });
    const first = decideFast(context, fast, "one-deadline/k", 1);
    await sleep(50);
    // It joins the first sync, whose grant is sized for one request, and has about 300 ms left for its own.
    const started = Date.now();
    const second = await decideFast(context, fast, "one-deadline/k", 500).catch((error: unknown) => error);
    expect(second).toBeInstanceOf(TimeoutError);
    // Its timer fires at the deadline, give or take a loaded machine, never a second timeout later.
    expect(Date.now() - started).toBeLessThan(fast.timeoutMs + 500);
    await first;
    while (pending.length) await pending.shift()!.catch(() => undefined);
  });

  it("tells a crowd that joined a sync in flight when its key admits again, not a saturated key's booked call later", async () => {
    const { T0, context, fast, denied } = await crowdJoiningASync("crowd-told");
    // Its units leave the window with their bucket, a minute on.
    expect(denied.retryAfter).toBeLessThanOrEqual(62_000);
    vi.setSystemTime(T0 + denied.retryAfter);
    expect(await decideFast(context, fast, "crowd-told/k", 1)).toMatchObject({ allowed: true });
  });

  it("tells a denied crowd its key is back to full no sooner than it admits again", async () => {
    const { T0, denied } = await crowdJoiningASync("crowd-reset");
    expect(denied.resetAt).toBeGreaterThanOrEqual(T0 + denied.retryAfter);
  });

  it("makes a key's booked call on time when no request comes to make it, so the next request is not kept waiting on it", async () => {
    // A 2 s interval and 5 s timeout leave room for a slow machine: the second request must come
    // within a quarter interval of the first answer, and that answer within half the timeout.
    const fast = rule({ name: "on-time", mode: "fast", limit: 2, periodMs: 3_600_000, syncMs: 2_000, timeoutMs: 5_000 });
    const context = (): FastContext & { settled: () => Promise<unknown> } => {
      const pending: Promise<unknown>[] = [];
      return { namespace: env.LIMITER, waitUntil: (p) => void pending.push(p), settled: async () => { while (pending.length) await pending.shift(); } };
    };
    // The first request waits on the first sync, which leases both units and books the next call an interval on.
    const first = context();
    expect(await decideFast(first, fast, "on-time/k", 1)).toMatchObject({ allowed: true });
    const answeredAt = localView(env.LIMITER, "on-time/k")!.lastSyncAt;
    // The second spends the last unit too soon after that answer to top it up early.
    expect(await decideFast(context(), fast, "on-time/k", 1)).toMatchObject({ allowed: true, reason: "local" });
    const before = syncs();
    // The first request's waitUntil holds the timer, which makes the booked call a round trip before its time.
    await first.settled();
    expect(syncs()).toBe(before + 1);
    expect(localView(env.LIMITER, "on-time/k")!.lastSyncAt).toBeGreaterThan(answeredAt + 1_000);
    // Its answer (the key is spent) is already here: the next request is denied from the cache, not after a call.
    expect(await decideFast(context(), fast, "on-time/k", 1)).toMatchObject({ allowed: false, reason: "cache" });
  });
});

describe("a request its first sync did not cover", () => {
  it("leaves the units a costly request could not spend to the next requests, not pinned and counted as spent", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const T0 = frozenStart();
    vi.setSystemTime(T0);
    const context: FastContext = { namespace: env.LIMITER, waitUntil: () => undefined };
    const fast = rule({ name: "short-left", mode: "fast", aggregate: undefined, limit: 10, periodMs: 86_400_000, syncMs: 1_000, timeoutMs: 5_000 });
    expect(await decideFast(context, fast, "short-left/k", 7)).toMatchObject({ allowed: true, remaining: 3 });
    // 5 do not fit in the 3 left: the object tops the isolate up with nothing, a short grant.
    expect(await decideFast(context, fast, "short-left/k", 5)).toMatchObject({ allowed: false, remaining: 3 });
    const later: boolean[] = [];
    for (const at of [3_000, 6_000, 9_000, 12_000]) {
      vi.setSystemTime(T0 + at);
      later.push((await decideFast(context, fast, "short-left/k", 1)).allowed);
    }
    vi.setSystemTime(T0 + 600_000);
    const { remaining } = await peek("short-left/k", { algorithm: "sliding-window", limit: 10, periodMs: 86_400_000, burst: 10, buckets: 1 });
    expect({ admitted: later.filter(Boolean).length, remaining }).toEqual({ admitted: 3, remaining: 0 });
  });

  it("is never told 'limit' by the isolate at a key with room once its one deadline is spent: onError answers", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    let T = Date.now();
    vi.setSystemTime(T);
    const pending: Promise<unknown>[] = [];
    const fast = rule({ name: "deadline-spent", mode: "fast", aggregate: undefined, limit: 1_000, periodMs: 3_600_000, timeoutMs: 300 });
    // The object answers each sync as the rule's timeout runs out.
    const slow = delayedSyncs(async () => {
      await sleep(20);
      vi.setSystemTime((T += fast.timeoutMs));
    });
    const context: FastContext = { namespace: slow, waitUntil: (p) => void pending.push(p) };
    const first = decideFast(context, fast, "deadline-spent/k", 1);
    await sleep(5);
    // Joins the first sync, sized for one unit: 500 do not fit in its grant.
    const second = await decideFast(context, fast, "deadline-spent/k", 500).catch((error: unknown) => error);
    await first;
    while (pending.length) await pending.shift()!.catch(() => undefined);
    if (!(second instanceof TimeoutError)) expect(second).toMatchObject({ allowed: true });
  });
});

describe("a unit given back into a fast key's lease", () => {
  it("is not spent in the next window once its own has turned: a fixed window admits its limit there, no more", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const T0 = frozenStart();
    const context: FastContext = { namespace: env.LIMITER, waitUntil: () => undefined };
    const fast = rule({ name: "back-turn", mode: "fast", aggregate: undefined, algorithm: "fixed-window", limit: 4, periodMs: 10_000, syncMs: 1_000, timeoutMs: 5_000 });
    const at = async (ms: number) => {
      vi.setSystemTime(T0 + ms);
      return decideFast(context, fast, "back-turn/k", 1);
    };
    expect(await at(1_000)).toMatchObject({ allowed: true });
    // Past the booked call: a background sync reports both units spent, and the object stops pinning them.
    expect(await at(2_100)).toMatchObject({ allowed: true });
    await sleep(50);
    // The first request is given back before the window turns: into the lease, its unit still counted there.
    refundFast(context.namespace, "back-turn/k", 1, T0 + 1_000);
    // In the next window another isolate asks for the whole limit before this one has reported anything.
    vi.setSystemTime(T0 + 10_010);
    const other = { isolate: "another isolate", seq: 1, reports: [], demand: 4, elapsedMs: 1_000, need: 4, horizonMs: 1_000, held: 0, sentAt: T0 + 10_010 };
    const { units } = await env.LIMITER.get(env.LIMITER.idFromName("back-turn/k")).sync(policyOf(fast), other);
    const here = [];
    for (let i = 0; i < 6; i++) here.push((await at(10_010)).allowed);
    expect(units + here.filter(Boolean).length).toBeLessThanOrEqual(4);
  });
});

describe("a fast key's denial of a costly request", () => {
  it("tells a request costlier than the denial it meets when its cost fits, so that a retry then passes", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const T0 = frozenStart();
    vi.setSystemTime(T0);
    const context: FastContext = { namespace: env.LIMITER, waitUntil: () => undefined };
    const fast = rule({ name: "costlier-told", mode: "fast", aggregate: undefined, limit: 6, periodMs: 4_000, buckets: 4, syncMs: 200, timeoutMs: 5_000 });
    // Two units in one bucket, four in the next: one unit comes back a bucket before four do.
    for (let i = 0; i < 2; i++) expect(await decideFast(context, fast, "costlier-told/k", 1)).toMatchObject({ allowed: true });
    vi.setSystemTime(T0 + 1_000);
    for (let i = 0; i < 4; i++) expect(await decideFast(context, fast, "costlier-told/k", 1)).toMatchObject({ allowed: true });
    expect(await decideFast(context, fast, "costlier-told/k", 1)).toMatchObject({ allowed: false });
    const costlier = await decideFast(context, fast, "costlier-told/k", 4);
    expect(costlier).toMatchObject({ allowed: false });
    vi.setSystemTime(T0 + 1_000 + costlier.retryAfter);
    expect(await decideFast(context, fast, "costlier-told/k", 4)).toMatchObject({ allowed: true });
  });

  it("holds a one-unit request back only until a unit comes, not for the costly request's wait", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const T0 = frozenStart();
    vi.setSystemTime(T0);
    const context: FastContext = { namespace: env.LIMITER, waitUntil: () => undefined };
    const fast = rule({ name: "costly-held", mode: "fast", aggregate: undefined, algorithm: "token-bucket", limit: 10, periodMs: 10_000, burst: 10, syncMs: 1_000, timeoutMs: 5_000 });
    for (let i = 0; i < 10; i++) expect(await decideFast(context, fast, "costly-held/k", 1)).toMatchObject({ allowed: true });
    vi.setSystemTime(T0 + 100);
    const costly = await decideFast(context, fast, "costly-held/k", 10);
    expect(costly).toMatchObject({ allowed: false });
    expect(costly.retryAfter).toBeGreaterThan(9_000);
    // A costly request is told its own wait from the cache.
    vi.setSystemTime(T0 + 2_500);
    expect(await decideFast(context, fast, "costly-held/k", 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: costly.retryAfter - 2_400 });
    // A token a second: past the key's booked call (a quarter period on, as it has nothing to spare), four have come.
    vi.setSystemTime(T0 + 5_000);
    expect(await decideFast(context, fast, "costly-held/k", 1)).toMatchObject({ allowed: true });
  });
});
