import { abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import type { RateLimiter } from "../../src/durable-object/rate-limiter";
import { frozenStart } from "../helpers/clock";
import { PEERS_KEPT_TILL_DUE } from "../../src/fast/peer";

const window: Policy = { algorithm: "sliding-window", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 };
const bucket: Policy = { algorithm: "token-bucket", limit: 6, periodMs: 60_000, burst: 6, buckets: 1 };

const daily: Policy = { algorithm: "fixed-window", limit: 1_000, periodMs: 86_400_000, burst: 1_000, buckets: 1 };
const T0 = frozenStart();

const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));
const peerRows = (stub: ReturnType<typeof limiter>) =>
  runInDurableObject(stub, (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM peers").one().n);

/** Moves the frozen clock on to `until` a second at a time, running the object's alarm whenever it is due, as workerd would; says how many ran. */
async function alarmsUntil(stub: ReturnType<typeof limiter>, until: number): Promise<number> {
  let ran = 0;
  for (let now = Date.now(); now <= until; now += 1_000) {
    vi.setSystemTime(now);
    const at = await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
    if (at !== null && at <= now && (await runDurableObjectAlarm(stub))) ran++;
  }
  return ran;
}
const allowed = (results: { decision: { allowed: boolean } }[]) => results.map((r) => r.decision.allowed);

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter", () => {
  it("decides a batch in order, each request as if it came alone", async () => {
    const results = await limiter("batch/a").decide(window, [1, 1, 2, 1, 1]);
    expect(allowed(results)).toEqual([true, true, false, true, false]);
  });

  it("admits again at the sliding window's edge, not before", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("edge/window");
    await stub.decide(window, [1, 1, 1]);
    // The 3 weigh 3 × (1 − e/60 s) in the next window: one more fits from e = 20 s.
    vi.setSystemTime(T0 + 60_000 + 19_999);
    expect(allowed(await stub.decide(window, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 60_000 + 20_000);
    expect(allowed(await stub.decide(window, [1]))).toEqual([true]);
  });

  it("refills the token bucket to the millisecond", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("edge/bucket");
    await stub.decide(bucket, [6]);
    vi.setSystemTime(T0 + 9_999);
    expect(allowed(await stub.decide(bucket, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 10_000);
    expect(allowed(await stub.decide(bucket, [1]))).toEqual([true]);
  });

  it("keeps its state when the object is evicted and restarted", async () => {
    await limiter("evict/a").decide(window, [1, 1]);
    await abortAllDurableObjects();
    const standing = await limiter("evict/a").peek(window);
    expect(standing.remaining).toBe(1);
  });

  it("gives refunded units back to the window they were counted in", async () => {
    const stub = limiter("refund/a");
    const [first] = await stub.decide(window, [3]);
    await stub.refund(window, 2, first!.countedAt);
    expect((await stub.peek(window)).remaining).toBe(2);
  });

  it("peeks without consuming", async () => {
    const stub = limiter("peek/a");
    await stub.decide(window, [1]);
    await stub.peek(window);
    await stub.peek(window);
    expect((await stub.peek(window)).remaining).toBe(2);
  });

  it("forgets everything on reset", async () => {
    const stub = limiter("reset/a");
    await stub.decide(window, [3]);
    await stub.reset();
    expect(allowed(await stub.decide(window, [3]))).toEqual([true]);
  });

  it("carries what was used over when the rule's algorithm changes", async () => {
    const stub = limiter("switch/a");
    await stub.decide(window, [3]);
    expect(allowed(await stub.decide(bucket, [1, 1, 1, 1]))).toEqual([true, true, true, false]);
  });

  it("decides two Worker versions' algorithms from one count: neither grants a fresh quota", async () => {
    const stub = limiter("switch/b");
    const results = [];
    for (let i = 0; i < 10; i++) results.push(...(await stub.decide(i % 2 === 0 ? window : { ...bucket, limit: 3, burst: 3 }, [1])));
    expect(allowed(results)).toEqual([true, true, true, false, false, false, false, false, false, false]);
  });

  it("frees a blocked key by the rule's new terms when its block is removed or shortened, across a restart", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const blocking: Policy = { ...window, limit: 1, periodMs: 1_000, blockMs: 3_600_000 };
    const [removed, shortened] = [limiter("block/removed"), limiter("block/shortened")];
    for (const stub of [removed, shortened]) expect(allowed(await stub.decide(blocking, [1, 1]))).toEqual([true, false]);
    await abortAllDurableObjects();
    vi.setSystemTime(T0 + 5_000);
    expect(allowed(await limiter("block/removed").decide({ ...blocking, blockMs: undefined }, [1]))).toEqual([true]);
    expect(allowed(await limiter("block/shortened").decide({ ...blocking, blockMs: 10_000 }, [1]))).toEqual([false]);
    expect(allowed(await limiter("block/shortened").decide(blocking, [1]))).toEqual([false]);
    vi.setSystemTime(T0 + 10_000);
    expect(allowed(await limiter("block/shortened").decide({ ...blocking, blockMs: 10_000 }, [1]))).toEqual([true]);
  });

  it("keeps one Worker version's long block when another version's shorter block starts after its own ended", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const long: Policy = { ...window, limit: 1, periodMs: 1_000, blockMs: 3_600_000 };
    const short: Policy = { ...long, blockMs: 10_000 };
    const stub = limiter("block/versions");
    expect(allowed(await stub.decide(long, [1, 1]))).toEqual([true, false]);
    vi.setSystemTime(T0 + 20_000);
    expect(allowed(await stub.decide(short, [1, 1]))).toEqual([true, false]);
    vi.setSystemTime(T0 + 40_000);
    expect(allowed(await stub.decide(long, [1]))).toEqual([false]);
    expect(allowed(await stub.decide(short, [1]))).toEqual([true]);
  });

  it("reads a fast key's standing under the strictest policy a live isolate leases under, as its isolates find it", async () => {
    const old: Policy = { ...window, limit: 5, periodMs: 3_600_000 };
    const raised: Policy = { ...old, limit: 8 };
    const stub = limiter("peek/versions");
    const lease = await stub.sync(old, { isolate: "old", seq: 1, reports: [], demand: 5, elapsedMs: 1_000, need: 5, horizonMs: 1_000 });
    await stub.sync(old, { isolate: "old", seq: 2, reports: [{ lease: lease.seq, spent: [{ at: Date.now(), units: 5 }], unspent: lease.units - 5 }], demand: 0, elapsedMs: 1_000, need: 0, horizonMs: 1_000 });
    expect(await stub.peek(raised)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it("keeps what it carried over from an algorithm no version asks under any more, though it denied: the wait a denial states is the wait", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 300_000, burst: 3, buckets: 1 };
    const log: Policy = { algorithm: "sliding-log", limit: 3, periodMs: 20_000, burst: 3, buckets: 1 };
    const stub = limiter("switch/denied");
    expect(allowed(await stub.decide(fixed, [1, 1, 1]))).toEqual([true, true, true]);
    // The rule changed: the old one was last asked under more than PEER_TTL_MS ago.
    vi.setSystemTime(T0 + 65_000);
    expect((await stub.decide(log, [1]))[0]!.decision).toMatchObject({ allowed: false, retryAfter: 20_000 });
    vi.setSystemTime(T0 + 75_000);
    expect((await stub.decide(log, [1]))[0]!.decision).toMatchObject({ allowed: false, retryAfter: 10_000 });
    vi.setSystemTime(T0 + 85_000);
    expect(allowed(await stub.decide(log, [1]))).toEqual([true]);
  });

  it("keeps what a fast key carried over from an algorithm no version asks under any more, though its sync granted nothing", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 300_000, burst: 3, buckets: 1 };
    // Stricter than the old rule, so leases are granted under it, and its units leave sooner than the old window ends.
    const log: Policy = { algorithm: "sliding-log", limit: 1, periodMs: 60_000, burst: 1, buckets: 1 };
    const stub = limiter("switch/denied-fast");
    expect(allowed(await stub.decide(fixed, [1, 1, 1]))).toEqual([true, true, true]);
    vi.setSystemTime(T0 + 65_000);
    const ask = (seq: number) => stub.sync(log, { isolate: "i", seq, reports: [], demand: 1, elapsedMs: 1_000, need: 1, horizonMs: 1_000 });
    expect((await ask(1)).units).toBe(0);
    vi.setSystemTime(T0 + 130_000);
    expect((await ask(2)).units).toBe(1);
  });

  it("counts an old version's isolate leased under the new version's policy as asking under that one, so the carry is kept", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 600_000, burst: 3, buckets: 1 };
    // Stricter than the old rule: every lease, the old version's too, is granted under it.
    const log: Policy = { algorithm: "sliding-log", limit: 1, periodMs: 240_000, burst: 1, buckets: 1 };
    const stub = limiter("switch/leased-under");
    expect(allowed(await stub.decide(fixed, [1, 1, 1]))).toEqual([true, true, true]);
    const ask = (policy: Policy, isolate: string, seq: number, need: number) =>
      stub.sync(policy, { isolate, seq, reports: [], demand: need, elapsedMs: 20_000, need, horizonMs: 1_000 });
    let grantedAt: number | undefined;
    for (let at = 20_000, seq = 1; at < 600_000 && grantedAt === undefined; at += 20_000, seq++) {
      vi.setSystemTime(T0 + at);
      await ask(fixed, "old", seq, 0);
      if ((await ask(log, "new", seq, 1)).units > 0) grantedAt = at;
    }
    // Carried and kept a minute after the old algorithm was last leased under (the strict decisions at 0), freed 240 s later; not at the old window's turn.
    expect(grantedAt).toBeDefined();
    expect(grantedAt!).toBeLessThan(600_000);
  });

  it("keeps what it carried over at once after a restart: a deploy restarts objects, and the old rule is gone", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 300_000, burst: 3, buckets: 1 };
    const log: Policy = { algorithm: "sliding-log", limit: 3, periodMs: 20_000, burst: 3, buckets: 1 };
    expect(allowed(await limiter("switch/restart").decide(fixed, [1, 1, 1]))).toEqual([true, true, true]);
    await abortAllDurableObjects();
    vi.setSystemTime(T0 + 5_000);
    expect((await limiter("switch/restart").decide(log, [1]))[0]!.decision).toMatchObject({ allowed: false, retryAfter: 20_000 });
    vi.setSystemTime(T0 + 15_000);
    expect((await limiter("switch/restart").decide(log, [1]))[0]!.decision).toMatchObject({ allowed: false, retryAfter: 10_000 });
    vi.setSystemTime(T0 + 25_000);
    expect(allowed(await limiter("switch/restart").decide(log, [1]))).toEqual([true]);
  });

  it("holds a token bucket lowered then raised again across restarts to what it took: a rolled-back lowering grants no fresh quota", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const generous: Policy = { algorithm: "token-bucket", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
    const lowered: Policy = { ...generous, limit: 5, burst: 5 };
    expect(allowed(await limiter("lowered/rolled-back").decide(generous, Array<number>(100).fill(1))).every(Boolean)).toBe(true);
    await abortAllDurableObjects();
    vi.setSystemTime(T0 + 1_000);
    expect(allowed(await limiter("lowered/rolled-back").decide(lowered, [1]))).toEqual([false]);
    await abortAllDurableObjects();
    vi.setSystemTime(T0 + 8_000);
    // 8 s of the generous rule's refill: 13 units, not its burst again.
    const admitted = allowed(await limiter("lowered/rolled-back").decide(generous, Array<number>(100).fill(1))).filter(Boolean);
    expect(admitted).toHaveLength(13);
  });

  it("lets two live versions alternating algorithms each admit as its own algorithm frees the key, the old window first", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 120_000, burst: 3, buckets: 1 };
    const log: Policy = { algorithm: "sliding-log", limit: 3, periodMs: 20_000, burst: 3, buckets: 1 };
    const stub = limiter("switch/alternating");
    expect(allowed(await stub.decide(fixed, [1, 1, 1]))).toEqual([true, true, true]);
    const admittedAt: number[] = [];
    for (let at = 5_000; at <= 250_000; at += 5_000) {
      vi.setSystemTime(T0 + at);
      if ((await stub.decide(at % 10_000 === 0 ? fixed : log, [1]))[0]!.decision.allowed) admittedAt.push(at);
    }
    // The fixed window's 3 hold until it turns; then each switch carries the count over: 3 a window, not 3 a switch.
    expect(admittedAt).toEqual([120_000, 125_000, 130_000, 240_000, 245_000, 250_000]);
  });

  it("never locks a key out while two versions alternate algorithms slowly, more than a minute apart, across restarts too", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const bucket: Policy = { algorithm: "token-bucket", limit: 3, periodMs: 600_000, burst: 3, buckets: 1 };
    const log: Policy = { algorithm: "sliding-log", limit: 3, periodMs: 600_000, burst: 3, buckets: 1 };
    expect(allowed(await limiter("switch/slow").decide(bucket, [1, 1, 1]))).toEqual([true, true, true]);
    const admittedAt: number[] = [];
    for (let at = 70_000; at <= 3_600_000; at += 70_000) {
      vi.setSystemTime(T0 + at);
      if (at % 280_000 === 0) await abortAllDurableObjects();
      if ((await limiter("switch/slow").decide(at % 140_000 === 0 ? bucket : log, [1]))[0]!.decision.allowed) admittedAt.push(at);
    }
    // The sliding log's carried units, taken 70 s in, leave 600 s later: the next request after that is admitted.
    expect(admittedAt[0]).toBe(700_000);
    expect(admittedAt.length).toBeGreaterThan(3);
  });

  it("rejects an algorithm it does not know and keeps its state", async () => {
    const stub = limiter("switch/c");
    await stub.decide(window, [2]);
    const future = { ...window, algorithm: "leaky-bucket" } as unknown as Policy;
    const failure = await stub.decide(future, [1]).then(() => null, (error: unknown) => error);
    expect(String(failure)).toMatch(/unknown algorithm "leaky-bucket"/);
    expect((await stub.peek(window)).remaining).toBe(1);
  });

  it("deletes its storage once the key has fully recovered", async () => {
    const quick: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 100, burst: 10, buckets: 1 };
    const stub = limiter("cleanup/a");
    await stub.decide(quick, [10]);
    await new Promise((resolve) => setTimeout(resolve, 250));
    await runDurableObjectAlarm(stub);
    const rows = await runInDurableObject(stub, (_instance, state) =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'limiter'").toArray(),
    );
    expect(rows).toEqual([]);
    expect((await stub.peek(quick)).remaining).toBe(10);
  });

  it("deletes a fixed window's storage a period after its window's turn, not one more period at every alarm", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 10_000, burst: 3, buckets: 1 };
    const stub = limiter("cleanup/fixed");
    vi.setSystemTime(T0 + 1_000);
    await stub.decide(fixed, [1]);
    // Its window turns at T0 + 10 s; its count holds against another algorithm until T0 + 20 s.
    vi.setSystemTime(T0 + 25_000);
    await runDurableObjectAlarm(stub);
    const tables = await runInDurableObject(stub, (_instance, state) => state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'limiter'").toArray());
    expect(tables).toEqual([]);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).toBeNull();
  });

  it("makes only the table it writes to: a strict key's first state writes no peers table, whose making costs two rows", async () => {
    await limiter("tables/strict").decide(window, [1]);
    const tables = () => runInDurableObject(limiter("tables/strict"), (_instance, state) =>
      state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('limiter', 'peers')").toArray().map((r) => r.name),
    );
    expect(await tables()).toEqual(["limiter"]);
    await limiter("tables/strict").sync(window, { isolate: "a", seq: 1, reports: [], demand: 0, elapsedMs: 0, need: 1, horizonMs: 1_000 });
    await abortAllDurableObjects();
    expect((await tables()).sort()).toEqual(["limiter", "peers"]);
    expect((await limiter("tables/strict").peek(window)).remaining).toBe(1);
  });

  it("deletes a recovered fast key at its alarm without writing what it settled first", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const tenSeconds: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 10_000, burst: 100, buckets: 10 };
    const stub = limiter("tables/fast-cleanup");
    vi.setSystemTime(T0);
    await stub.sync(tenSeconds, { isolate: "gone", seq: 1, reports: [], demand: 50, elapsedMs: 1_000, need: 0, horizonMs: 1_000 });
    vi.setSystemTime(T0 + 120_000);
    const written = await runInDurableObject(stub, async (object, state) => {
      const exec = state.storage.sql.exec.bind(state.storage.sql);
      let rows = 0;
      state.storage.sql.exec = ((query: string, ...bindings: unknown[]) => {
        const cursor = exec(query, ...bindings);
        cursor.toArray();
        rows += cursor.rowsWritten;
        return cursor;
      }) as typeof state.storage.sql.exec;
      await (object as RateLimiter).alarm();
      state.storage.sql.exec = exec;
      return rows;
    });
    expect(written).toBe(0);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'limiter' OR name = 'peers'").toArray())).toEqual([]);
  });

  it("wakes to clean up after the key recovers, each key by a spread of its own: keys of one fixed window do not wake at once", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const fixed: Policy = { algorithm: "fixed-window", limit: 3, periodMs: 10_000, burst: 3, buckets: 1 };
    const alarms: number[] = [];
    for (let i = 0; i < 20; i++) {
      const stub = limiter(`spread/${i}`);
      await stub.decide(fixed, [1]);
      alarms.push((await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm()))!);
    }
    expect(Math.min(...alarms)).toBeGreaterThanOrEqual(T0 + 10_000);
    expect(Math.max(...alarms)).toBeLessThan(T0 + 20_000);
    expect(new Set(alarms).size).toBeGreaterThan(15);
  });

  it("keeps its storage while the key is still recovering", async () => {
    const stub = limiter("cleanup/b");
    await stub.decide(window, [1]);
    await runDurableObjectAlarm(stub);
    expect((await stub.peek(window)).remaining).toBe(2);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).not.toBeNull();
  });

  it("forgets at its alarm a vanished isolate's late lease whose window has passed, rather than counting it taken until another sync", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const tenSeconds: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 10_000, burst: 100, buckets: 10 };
    const stub = limiter("pins/late-at-alarm");
    vi.setSystemTime(T0);
    const lease = await stub.sync(tenSeconds, { isolate: "gone", seq: 1, reports: [], demand: 50, elapsedMs: 1_000, need: 0, horizonMs: 1_000 });
    // Another isolate keeps the object alive past the alarm, asking for nothing.
    vi.setSystemTime(T0 + 5_000);
    await stub.sync(tenSeconds, { isolate: "here", seq: 1, reports: [], demand: 0, elapsedMs: 1_000, need: 0, horizonMs: 1_000, release: true });
    vi.setSystemTime(T0 + 60_000);
    await runDurableObjectAlarm(stub);
    vi.setSystemTime(T0 + 60_001);
    const standing = await stub.peek(tenSeconds);
    await stub.reset();
    expect(lease.units).toBeGreaterThan(0);
    expect(standing.remaining).toBe(100);
  });

  /** `count` isolates that each spend a unit of the daily key and give back the rest, as isolates that then go quiet do. */
  async function quietIsolates(stub: ReturnType<typeof limiter>, count: number, prefix: string): Promise<void> {
    const spent = [{ at: Math.floor(Date.now() / daily.periodMs) * daily.periodMs, units: 1 }];
    for (let i = 0; i < count; i++) {
      const isolate = `${prefix}-${i}`;
      const lease = await stub.sync(daily, { isolate, seq: 1, reports: [], demand: 1, elapsedMs: 1_000, need: 1, horizonMs: 1_000, held: 0 });
      await stub.sync(daily, { isolate, seq: 2, reports: [{ lease: lease.seq, spent, unspent: lease.units - 1 }], demand: 0, elapsedMs: 1_000, need: 0, horizonMs: 1_000, release: true });
    }
  }

  it("forgets isolates silent since the object's first look, though the key's window ends hours later", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("peers/silent-daily");
    await quietIsolates(stub, 1, "early");
    // The others report just before the object's first look, which finds them live.
    vi.setSystemTime(T0 + 50_000);
    await quietIsolates(stub, PEERS_KEPT_TILL_DUE + 1, "late");
    expect(await alarmsUntil(stub, T0 + 60_000 + 11_000)).toBe(1);
    await alarmsUntil(stub, T0 + 50_000 + 130_000);
    expect(await peerRows(stub)).toBe(0);
  });

  it("forgets isolates that first called after the object had forgotten every other", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("peers/silent-later");
    // Their units keep the key's state for the rest of the day.
    await quietIsolates(stub, PEERS_KEPT_TILL_DUE + 1, "first");
    await alarmsUntil(stub, T0 + 10 * 60_000);
    expect(await peerRows(stub)).toBe(0);
    await quietIsolates(stub, PEERS_KEPT_TILL_DUE + 1, "later");
    await alarmsUntil(stub, T0 + 10 * 60_000 + 130_000);
    expect(await peerRows(stub)).toBe(0);
  });

  it("keeps a few quiet isolates until the key is due rather than wake a lightly used daily key every minute", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("peers/few-daily");
    for (let minute = 0; minute < 10; minute++) {
      vi.setSystemTime(T0 + minute * 60_000);
      await quietIsolates(stub, 1, `m${minute}`);
      if (minute === 0) await alarmsUntil(stub, T0 + 59_000);
    }
    expect(await alarmsUntil(stub, T0 + 11 * 60_000)).toBeLessThanOrEqual(1);
  });

  it("deletes the rows of isolates gone silent when it restarts, rather than read them at every start until the key is due", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const stub = limiter("peers/few-restarted");
    await quietIsolates(stub, 2, "gone");
    vi.setSystemTime(T0 + 5 * 60_000);
    await abortAllDurableObjects();
    await quietIsolates(limiter("peers/few-restarted"), 1, "new");
    expect(await peerRows(limiter("peers/few-restarted"))).toBe(1);
  });

  it("keeps each fast-mode isolate in a row of its own, so a sync's write does not grow with the peers", async () => {
    const fast: Policy = { algorithm: "sliding-window", limit: 100_000, periodMs: 60_000, burst: 100_000, buckets: 60 };
    const stub = limiter("peers/many");
    // One call into the object for the thousand syncs: the RPCs' own cost is not what this is about.
    await runInDurableObject(stub, (object) => {
      for (let i = 0; i < 1_000; i++) {
        (object as RateLimiter).sync(fast, { isolate: `isolate-${i}`, seq: 1, reports: [], demand: 1, elapsedMs: 1_000, need: 1, horizonMs: 1_000 });
      }
    });
    const largest = await runInDurableObject(stub, (_object, state) =>
      Math.max(...state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'").toArray().flatMap(({ name }) =>
        state.storage.sql.exec<{ size: number }>(`SELECT length(value) AS size FROM ${name}`).toArray().map((r) => r.size))),
    );
    expect(largest).toBeLessThan(2_000);
  });

  it("keeps its fast-mode peers and their pins when the object is evicted and restarted", async () => {
    const fast: Policy = { algorithm: "sliding-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 60 };
    await limiter("peers/evict").sync(fast, { isolate: "a", seq: 1, reports: [], demand: 0, elapsedMs: 0, need: 4, horizonMs: 1_000 });
    await abortAllDurableObjects();
    expect((await limiter("peers/evict").peek(fast)).remaining).toBe(6);
  });
});
