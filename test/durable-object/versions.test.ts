// Two live Worker versions, or a rule changed under a live key, with the real object: what one version's isolates spent counts under the other's policy too.
import { abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { slotOf, type Policy } from "../../src/algorithms";
import type { SyncRequest } from "../../src/fast/lease";
import { frozenStart } from "../helpers/clock";

const T0 = frozenStart();
const HOUR = 3_600_000;
const limiter = (name: string) => env.LIMITER.get(env.LIMITER.idFromName(name));

afterEach(() => {
  vi.useRealTimers();
});

const bucket30: Policy = { algorithm: "token-bucket", limit: 30, periodMs: HOUR, burst: 30, buckets: 1 };
const window20: Policy = { algorithm: "sliding-window", limit: 20, periodMs: HOUR, burst: 20, buckets: 60 };
const fixed20: Policy = { algorithm: "fixed-window", limit: 20, periodMs: HOUR, burst: 20, buckets: 1 };
const log20: Policy = { algorithm: "sliding-log", limit: 20, periodMs: HOUR, burst: 20, buckets: 1 };
const fixed100: Policy = { algorithm: "fixed-window", limit: 100, periodMs: HOUR, burst: 100, buckets: 1 };
const minute1: Policy = { algorithm: "sliding-window", limit: 1, periodMs: 60_000, burst: 1, buckets: 60 };
const DAY = 86_400_000;
const month100: Policy = { algorithm: "fixed-window", limit: 100, periodMs: 31 * DAY, burst: 100, buckets: 1, months: 1 };
const days31of90: Policy = { algorithm: "fixed-window", limit: 90, periodMs: 31 * DAY, burst: 90, buckets: 1 };

/**
 * A fast isolate of `reporter`'s version asks for 10 units a second for `seconds` seconds, each
 * time reporting the lease before as spent, filed at its own rule's slot, while `stricter`'s
 * version stays live: its isolate syncs each second, or (`strict`) a strict request of it comes
 * every 20 s. Returns the units the reporter was leased and spent.
 */
async function spentBeside(name: string, reporter: Policy, stricter: Policy, seconds: number, strict = false): Promise<number> {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(T0 + 30 * 60_000 + 30_000);
  const stub = limiter(name);
  const idle = (seq: number): SyncRequest => ({ isolate: "stricter", seq, reports: [], demand: 0, elapsedMs: 1_000, need: 0, horizonMs: 1_000 });
  const keepLive = (seq: number) => (strict ? stub.decide(stricter, [0]) : stub.sync(stricter, idle(seq)));
  await keepLive(1);
  let spent = 0;
  let last: { seq: number; units: number } | undefined;
  for (let seq = 1; seq <= seconds; seq++) {
    vi.setSystemTime(Date.now() + 1_000);
    if (!strict || seq % 20 === 0) await keepLive(seq + 1);
    const reports = last ? [{ lease: last.seq, spent: last.units > 0 ? [{ at: slotOf(reporter, Date.now()), units: last.units }] : [], unspent: 0 }] : [];
    spent += last?.units ?? 0;
    const lease = await stub.sync(reporter, { isolate: "reporter", seq, reports, demand: 10, elapsedMs: 1_000, need: 10, horizonMs: 1_000 });
    last = { seq: lease.seq, units: lease.units };
  }
  return spent;
}

describe("a fast isolate leased under another live version's policy of another algorithm", () => {
  // Within the hour, the most generous of the two admits its burst: 30 for the bucket, and under 2 units of refill.
  it.each([
    ["a sliding window", window20],
    ["a fixed window", fixed20],
    ["a sliding log", log20],
  ])("has what a token bucket's isolate spent counted under %s, which dropped it as filed at time 0, and leased it out again", async (_, stricter) => {
    expect(await spentBeside(`versions/bucket-under/${stricter.algorithm}`, bucket30, stricter, 10)).toBeLessThanOrEqual(32);
  });

  it("has what a fixed window's isolate spent counted under a shorter sliding window, which dropped it as filed at its window's start", async () => {
    expect(await spentBeside("versions/fixed-under/minute", fixed100, minute1, 150)).toBeLessThanOrEqual(100);
  });

  it.each([false, true])("has what a calendar month's isolate spent counted under a 31-day window of the same length, which files its units otherwise (the other version strict: %s)", async (strict) => {
    expect(await spentBeside(`versions/month-under-31d/${strict}`, month100, days31of90, 60, strict)).toBeLessThanOrEqual(100);
  });

  it("has what a token bucket's isolate spent counted under a strict version's sliding window, which the lease was granted under", async () => {
    expect(await spentBeside("versions/bucket-under/strict", bucket30, window20, 60, true)).toBeLessThanOrEqual(32);
  });
});

describe("a strict key under a concurrency version and a rate version at once", () => {
  const slots: Policy = { algorithm: "concurrency", limit: 5, periodMs: 60_000, burst: 5, buckets: 1 };
  const perSecond: Policy = { algorithm: "sliding-window", limit: 5, periodMs: 1_000, burst: 5, buckets: 60 };

  it("keeps a slot given back under the concurrency version from turning the rate version's units into slots held a whole slotTtl", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/slots-and-rate");
    vi.setSystemTime(T0);
    const [held] = await stub.decide(slots, [1]);
    vi.setSystemTime(T0 + 100);
    await stub.decide(perSecond, [1, 1, 1, 1]);
    vi.setSystemTime(T0 + 500);
    await stub.refund(slots, 1, held!.countedAt);
    // Nothing is in flight, and the rate version's units left its 1 s window 2 s ago.
    vi.setSystemTime(T0 + 3_000);
    const [underRate] = await stub.decide(perSecond, [1]);
    const [underSlots] = await stub.decide(slots, [1]);
    expect([underRate!.decision.allowed, underSlots!.decision.allowed]).toEqual([true, true]);
  });

  it("admits the concurrency version's requests by its own slots while the rate version's traffic stays within its limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/slots-beside-busy-rate");
    const perMinute: Policy = { ...perSecond, limit: 100, periodMs: 60_000 };
    const denied: number[] = [];
    // One request of the concurrency version in flight at a time, a rate request during each, 30 a minute of a limit of 100.
    for (let s = 0; s < 120; s += 2) {
      vi.setSystemTime(T0 + s * 1_000);
      const [slot] = await stub.decide(slots, [1]);
      if (!slot!.decision.allowed) denied.push(s);
      vi.setSystemTime(T0 + s * 1_000 + 50);
      await stub.decide(perMinute, [1]);
      vi.setSystemTime(T0 + s * 1_000 + 100);
      if (slot!.decision.allowed) await stub.refund(slots, 1, slot!.countedAt);
    }
    expect(denied).toEqual([]);
    const five = await stub.decide(slots, [1, 1, 1, 1, 1]);
    expect(five.every((r) => r.decision.allowed)).toBe(true);
  });

  it.each([false, true])("keeps the concurrency version's slots through a fast rate version's sync (and a strict rate request counting its lease: %s)", async (strictAfter) => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter(`versions/slots-through-sync/${strictAfter}`);
    vi.setSystemTime(T0);
    await stub.decide(slots, [1, 1, 1, 1, 1]);
    vi.setSystemTime(T0 + 100);
    const perMinute: Policy = { ...perSecond, limit: 100, periodMs: 60_000 };
    const lease = await stub.sync(perMinute, { isolate: "fast", seq: 1, reports: [], demand: 1, elapsedMs: 1_000, need: 1, horizonMs: 1_000 });
    vi.setSystemTime(T0 + 200);
    const spent = [{ at: slotOf(perMinute, T0 + 150), units: 1 }];
    await stub.sync(perMinute, { isolate: "fast", seq: 2, reports: [{ lease: lease.seq, spent, unspent: lease.units - 1 }], demand: 1, elapsedMs: 100, need: 0, horizonMs: 1_000 });
    vi.setSystemTime(T0 + 300);
    if (strictAfter) await stub.decide(perMinute, [1]);
    const [sixth] = await stub.decide(slots, [1]);
    expect(sixth!.decision.allowed).toBe(false);
  });

  it("keeps the rate version's count through the concurrency version's admissions and a restart of the object", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const name = "versions/rate-count-beside-slots";
    const perHour: Policy = { ...perSecond, limit: 10, periodMs: 3_600_000 };
    vi.setSystemTime(T0);
    await limiter(name).decide(perHour, Array<number>(10).fill(1));
    vi.setSystemTime(T0 + 1_000);
    const [slot] = await limiter(name).decide(slots, [1]);
    await abortAllDurableObjects();
    vi.setSystemTime(T0 + 2_000);
    await limiter(name).refund(slots, 1, slot!.countedAt);
    await limiter(name).decide(slots, [1]);
    vi.setSystemTime(T0 + 3_000);
    const [late] = await limiter(name).decide(perHour, [1]);
    expect(late!.decision.allowed).toBe(false);
  });
});

describe("a fast rate version beside a strict concurrency version", () => {
  const slots: Policy = { algorithm: "concurrency", limit: 5, periodMs: 60_000, burst: 5, buckets: 1 };
  const perSecond: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 1_000, burst: 100, buckets: 60 };
  /** The object `name` at T0, the clock frozen, once the rate version's isolate has leased more units than the concurrency version has slots. */
  const leasedAtT0 = async (name: string) => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter(name);
    vi.setSystemTime(T0);
    const lease = await stub.sync(perSecond, { isolate: "fast", seq: 1, reports: [], demand: 10, elapsedMs: 1_000, need: 1, horizonMs: 1_000 });
    expect(lease.units).toBeGreaterThan(5);
    return stub;
  };

  it("leases the rate version's isolate by its own rate, not as slots of the concurrency version held a whole slotTtl", async () => {
    // Asking 10 a second of a rate of 100 a second, it spends about 10 a second; leased as slots, 5 a minute.
    expect(await spentBeside("versions/fast-beside-slots", perSecond, slots, 30, true)).toBeGreaterThanOrEqual(200);
  });

  it("peeks the concurrency version's slots as its decision finds them, the rate version's leases not counted as slots taken", async () => {
    const stub = await leasedAtT0("versions/slots-peeked-beside-fast");
    vi.setSystemTime(T0 + 100);
    expect(await stub.peek(slots)).toMatchObject({ allowed: true, remaining: 5 });
  });

  it("frees the concurrency version's slots once the rate version's window has forgotten what it spent, not a slotTtl after its isolate's last lease", async () => {
    const stub = await leasedAtT0("versions/slots-beside-fast");
    // The isolate goes quiet: its lease's units left the rate's 1 s window by T0 + 3 s.
    vi.setSystemTime(T0 + 3_000);
    const [slot] = await stub.decide(slots, [1]);
    expect(slot!.decision.allowed).toBe(true);
  });

  it("has the object's alarm settle a lease its isolate never reported into the rate's state, not into the concurrency version's slots held a whole slotTtl", async () => {
    const stub = await leasedAtT0("versions/alarm-settles-beside-slots");
    vi.setSystemTime(T0 + 100);
    await stub.decide(slots, [1]);
    // The isolate went quiet: its lease ended unreported, and the alarm counts it spent then.
    vi.setSystemTime(T0 + 20_000);
    await runDurableObjectAlarm(stub);
    const [slot] = await stub.decide(slots, [1]);
    expect(slot!.decision.allowed).toBe(true);
  });
});

describe("a strict key under a fixed-window version and a token-bucket version at once", () => {
  const fixed: Policy = { algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
  const refilled: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };

  it("carries a fixed window's count past its turn, so the bucket's version takes no full burst on top of the window's limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/fixed-and-bucket");
    let admitted = 0;
    const at = async (ms: number, policy: Policy, requests: number) => {
      vi.setSystemTime(T0 + ms);
      admitted += (await stub.decide(policy, Array<number>(requests).fill(1))).filter((r) => r.decision.allowed).length;
    };
    await at(1_000, fixed, 9);
    await at(1_000, refilled, 1);
    await at(31_000, fixed, 5);
    await at(31_000, refilled, 2);
    await at(59_000, fixed, 5);
    await at(60_500, refilled, 11);
    // In 59.5 s a fixed window alone admits at most 20 (10 each side of its turn), a bucket alone 10 + 10 × 59.5/60.
    expect(admitted).toBeLessThanOrEqual(20);
  });

  it("reads the fixed window's own count back when its version asks again, not the bucket's refilled view of it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/fixed-and-bucket-back");
    const window3: Policy = { ...fixed, limit: 3, burst: 3 };
    const bucket3: Policy = { ...refilled, limit: 3, burst: 3 };
    vi.setSystemTime(T0 + 17_000);
    await stub.decide(window3, [1, 1]);
    vi.setSystemTime(T0 + 18_000);
    await stub.decide(bucket3, [1]);
    // The window turns at T0 + 60 s and holds 3; the bucket, refilled, counts 2 used.
    vi.setSystemTime(T0 + 54_900);
    const [late] = await stub.decide(window3, [1]);
    expect(late!.decision).toMatchObject({ allowed: false, retryAfter: 5_100 });
  });

  it("keeps the bucket's state from running into debt while the fixed window's version spends within its own limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/fixed-and-bucket-debt");
    const fixed100: Policy = { ...fixed, limit: 100, burst: 100 };
    vi.setSystemTime(T0 + 1_000);
    await stub.decide(refilled, [1]);
    for (let minute = 0; minute < 10; minute++) {
      vi.setSystemTime(T0 + minute * 60_000 + 2_000);
      await stub.decide(fixed100, Array<number>(100).fill(1));
      vi.setSystemTime(T0 + minute * 60_000 + 3_000);
      await stub.decide(refilled, [1]);
    }
    // Its last window turned at 10 min and is held a period past that: by 12 min neither policy counts anything.
    vi.setSystemTime(T0 + 12 * 60_000 + 1_000);
    const [late] = await stub.decide(refilled, [1]);
    expect(late!.decision.allowed).toBe(true);
  });

  it("keeps the fixed window's count past its turn through the object's cleanup alarm, which came at the turn", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const stub = limiter("versions/fixed-and-bucket-alarm");
    vi.setSystemTime(T0 + 59_000);
    await stub.decide(fixed, Array<number>(10).fill(1));
    const due = (await runInDurableObject(stub, (_, state) => state.storage.getAlarm()))!;
    vi.setSystemTime(Math.max(due, T0 + 60_500));
    await runDurableObjectAlarm(stub);
    const taken = await stub.decide(refilled, Array<number>(10).fill(1));
    expect(taken.filter((r) => r.decision.allowed).length).toBeLessThanOrEqual(1);
  });
});
