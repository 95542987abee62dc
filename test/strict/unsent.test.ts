// A strict request onError admitted that its object never counted (never sent, or denied there late): the object counts it with the key's next call.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { policyOf } from "../../src/config/policy";
import { limiterStub } from "../../src/durable-object/stub";
import { decide, forget, giveBack, type Ask, type LimiterContext } from "../../src/limiter";
import { delayedCalls } from "../helpers/namespace";
import { rule } from "../helpers/rules";
import { admittedUnsent, carried } from "../../src/strict/unsent";
import type { MarkedLimiter } from "../fixtures/main";
import type { Env } from "../../src/env";

/** The real objects, each decide held until `open()` while `held`: a queue the key's requests wait out in line. */
function gatedDecides(): { context: LimiterContext; background: Promise<unknown>[]; gate: { held: boolean; open(): void } } {
  let opened: () => void = () => undefined;
  let waiting = new Promise<void>((resolve) => (opened = resolve));
  const gate = {
    held: false,
    open() {
      opened();
      waiting = new Promise<void>((resolve) => (opened = resolve));
    },
  };
  const namespace = delayedCalls("decide", () => (gate.held ? waiting : Promise.resolve()));
  const background: Promise<unknown>[] = [];
  return { context: { namespace, waitUntil: (promise) => void background.push(promise) }, background, gate };
}

const hourly = (name: string, limit: number) => rule({ name, algorithm: "fixed-window", limit, periodMs: 3_600_000, burst: limit, timeoutMs: 100, onError: "local" });

/** Past the breakers the timed-out calls opened (their backoff starts at the rule's 100 ms timeout): the object is asked again. */
const breakerClosed = () => new Promise((resolve) => setTimeout(resolve, 1_000));

/** Decides `n` requests of the ask at once, as concurrent requests for one key do. */
const together = (ask: Ask, context: LimiterContext, n: number) => Promise.all(Array.from({ length: n }, () => decide(ask, context)));

describe("strict requests onError admitted that the object never counted", () => {
  it("are counted by the object with the key's next call: a key whose queue timed out admits no more than its limit in all", async () => {
    const name = "unsent-in-line";
    const { context, background, gate } = gatedDecides();
    const ask: Ask = { rule: hourly(name, 5), key: "k", objectName: `${name}/k`, cost: 1 };
    // Two counted by the object, which then says 3 are left.
    const before = await together(ask, context, 1);
    before.push(...(await together(ask, context, 1)));
    gate.held = true;
    // One call in flight and four requests waiting in line behind it: all run out of time, and the
    // local fallback admits 3 (the object's last word), the first of them the one whose call is on its way.
    const queued = await together(ask, context, 5);
    expect(queued.map((t) => [t.decision.allowed, t.decision.reason])).toEqual([
      [true, "error"],
      [true, "error"],
      [true, "error"],
      [false, "error"],
      [false, "error"],
    ]);
    gate.held = false;
    gate.open();
    await Promise.all(background);
    await breakerClosed();
    // The object counted the one it was sent (late), and now the two never sent: the key is spent.
    const after = await together(ask, context, 1);
    expect(after[0]!.decision).toMatchObject({ allowed: false, reason: "limit", remaining: 0 });
  });

  it("are counted by the object with the key's next call when its late answer denied one: a bucket owes the unit", async () => {
    const name = "unsent-denied-late";
    const { context, background, gate } = gatedDecides();
    // 3 an hour: one unit every 20 minutes.
    const ask: Ask = { rule: rule({ name, algorithm: "token-bucket", limit: 3, periodMs: 3_600_000, burst: 3, timeoutMs: 100, onError: "local" }), key: "k", objectName: `${name}/k`, cost: 1 };
    await together(ask, context, 1);
    gate.held = true;
    const [late] = await together(ask, context, 1);
    expect(late!.decision).toMatchObject({ allowed: true, reason: "error" });
    // Another isolate takes the last two before this one's call lands: the late answer is a denial.
    await limiterStub(env.LIMITER, ask.objectName).decide(policyOf(ask.rule), [2]);
    gate.held = false;
    gate.open();
    await Promise.all(background);
    await breakerClosed();
    // Empty, and owing the unit admitted here: two refills away, not one.
    const next = (await together(ask, context, 1))[0]!.decision;
    expect(next).toMatchObject({ allowed: false, reason: "limit" });
    expect(next.retryAfter).toBeGreaterThan(30 * 60_000);
  });

  it("counts nothing for a request that another rule denied, whose units came back before the key's next call", async () => {
    const name = "unsent-given-back";
    const { context, background, gate } = gatedDecides();
    const ask: Ask = { rule: hourly(name, 3), key: "k", objectName: `${name}/k`, cost: 1 };
    await together(ask, context, 1);
    gate.held = true;
    const queued = await together(ask, context, 2);
    expect(queued.map((t) => t.decision.allowed)).toEqual([true, true]);
    // The one never sent went back: another rule denied its request.
    await giveBack(ask, queued[1]!, context);
    gate.held = false;
    gate.open();
    await Promise.all(background);
    await breakerClosed();
    // 1 before, 1 sent late: one left.
    expect((await together(ask, context, 1))[0]!.decision).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("are counted by the object with the key's next call when an overloaded object's failure turned them away in line", async () => {
    const name = "unsent-behind-overloaded";
    const marked = (env as unknown as { MARKED: DurableObjectNamespace<MarkedLimiter> }).MARKED;
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace: marked as unknown as Env["LIMITER"], waitUntil: (promise) => void background.push(promise) };
    const ask: Ask = { rule: hourly(name, 5), key: "k", objectName: `${name}/k`, cost: 1 };
    // One counted by the object, which then says 4 are left.
    await together(ask, context, 1);
    await marked.get(marked.idFromName(ask.objectName)).failWith(1, "overloaded");
    // One call fails as overloaded, and the three waiting in line behind it fail with it, never
    // sent: the local fallback admits all four (the object's last word).
    const turned = await together(ask, context, 4);
    expect(turned.map((t) => [t.decision.allowed, t.decision.reason])).toEqual(Array(4).fill([true, "error"]));
    await Promise.all(background);
    await breakerClosed();
    // The failed call's own request may or may not have been applied (here it was not), and is not
    // carried; the three never sent are: 1 + 3 + this one, the key's last.
    expect((await together(ask, context, 1))[0]!.decision).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("are forgotten with a reset key, whose next request starts from a full quota", async () => {
    const name = "unsent-reset";
    const { context, background, gate } = gatedDecides();
    const ask: Ask = { rule: hourly(name, 5), key: "k", objectName: `${name}/k`, cost: 1 };
    await together(ask, context, 1);
    gate.held = true;
    // One call in flight, two waiting in line behind it that never go: the local fallback admits all three.
    const queued = await together(ask, context, 3);
    expect(queued.map((t) => t.decision.allowed)).toEqual([true, true, true]);
    gate.held = false;
    gate.open();
    await Promise.all(background);
    await breakerClosed();
    await forget(context.namespace, ask.rule, ask.objectName);
    expect((await together(ask, context, 1))[0]!.decision).toMatchObject({ allowed: true, remaining: 4 });
  });

  it("leave a token bucket owing at most a period's refill, as a fast rule's onError admissions do, however many they were", async () => {
    // 60 a minute; ten minutes of an outage's admissions at its rate, carried at once.
    const policy = policyOf(rule({ name: "unsent-owed", algorithm: "token-bucket", limit: 60, periodMs: 60_000, burst: 60 }));
    const at = Date.now();
    const [decided] = await limiterStub(env.LIMITER, "unsent-owed/k").decide(policy, [1], [{ at, units: 600 }]);
    expect(decided!.decision).toMatchObject({ allowed: false, reason: "limit" });
    expect(decided!.decision.retryAfter).toBeLessThanOrEqual(61_000);
  });

  it("take no concurrency slot when the rule of that name is now a concurrency rule: slots are requests in flight, which nothing would release", async () => {
    const slots = { algorithm: "concurrency", limit: 2, periodMs: 60_000, burst: 2, buckets: 1 } as const;
    // Admitted under the rate rule the name had before; carried with the concurrency rule's first call.
    const [decided] = await limiterStub(env.LIMITER, "unsent-now-slots/k").decide(slots, [1], [{ at: Date.now(), units: 2 }]);
    expect(decided!.decision).toMatchObject({ allowed: true, remaining: 1 });
  });

  it("are kept one entry to a slot of the rule's algorithm, so what a call carries grows with time, not with requests", () => {
    // An outage of a key of a million an hour: each admission kept apart, a busy key's call carried millions.
    const policy = policyOf(hourly("unsent-slots", 1_000_000));
    const hour = 3_600_000 * 500_000;
    for (let i = 0; i < 1_000; i++) admittedUnsent("unsent-slots/k", policy, 1, hour + 1_000 + i);
    const { entries, answered } = carried("unsent-slots/k");
    answered(false);
    expect(entries.map(({ at, units }) => ({ at, units }))).toEqual([{ at: hour, units: 1_000 }]);
  });

  it("are kept for a gcra key one entry to a token bucket's tick, filed at its end, the later time", () => {
    // 1,000 an hour: a tick is 1/64 of the hour, 56,250 ms.
    const policy = policyOf(rule({ name: "unsent-gcra-slots", algorithm: "gcra", limit: 1_000, periodMs: 3_600_000, burst: 10 }));
    const tick = 3_600_000 / 64;
    const start = tick * 30_000_000;
    for (let i = 0; i < 1_000; i++) admittedUnsent("unsent-gcra-slots/k", policy, 1, start + i);
    const { entries, answered } = carried("unsent-gcra-slots/k");
    answered(false);
    expect(entries.map(({ at, units }) => ({ at, units }))).toEqual([{ at: start + tick - 1, units: 1_000 }]);
  });
});
