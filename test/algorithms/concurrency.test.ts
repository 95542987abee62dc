import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { adjust, carryOver, countedAt, decide, peek, usedUnits } from "../../src/algorithms";
import type { ConcurrencyState, Decision, LimiterState, Policy } from "../../src/algorithms";
import { renewConcurrency, RETRY_HINT_MS } from "../../src/algorithms/concurrency";
import { run } from "./reference";

const policy = (limit: number, slotTtlMs: number): Policy => ({ algorithm: "concurrency", limit, periodMs: slotTtlMs, burst: limit, buckets: 1 });
const T0 = 1_700_000_040_000;

/** Gives back the slots a decision took at `at`: what the Worker does when the request's response has been sent. */
function release(p: Policy, state: LimiterState | undefined, cost: number, at: number, now: number): LimiterState {
  return adjust(p, state, -cost, at, now);
}

describe("concurrency", () => {
  it("admits at most the limit in flight, and one more once a slot is released", () => {
    const p = policy(3, 60_000);
    const { decisions, state } = run(p, [T0, T0 + 1, T0 + 2, T0 + 3]);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    const freed = release(p, state, 1, T0 + 1, T0 + 4);
    expect(decide(p, freed, 1, T0 + 4).decision).toMatchObject({ allowed: true, remaining: 0 });
    expect(decide(p, freed, 2, T0 + 4).decision.allowed).toBe(false);
  });

  it("frees a slot never released after slotTtl, and not a millisecond sooner", () => {
    const p = policy(1, 60_000);
    const { state } = run(p, [T0]);
    expect(decide(p, state, 1, T0 + 59_999).decision.allowed).toBe(false);
    expect(decide(p, state, 1, T0 + 60_000).decision.allowed).toBe(true);
  });

  it("tells a denial to retry in a second, or when the earliest slot expires if that is sooner", () => {
    const p = policy(1, 60_000);
    const { state } = run(p, [T0]);
    expect(decide(p, state, 1, T0 + 10).decision).toMatchObject({ allowed: false, reason: "limit", retryAfter: RETRY_HINT_MS, moreAt: T0 + 60_000, resetAt: T0 + 60_000 });
    expect(decide(p, state, 1, T0 + 59_500).decision.retryAfter).toBe(500);
  });

  it("releases only slots taken at or before the release's time", () => {
    const p = policy(3, 60_000);
    const { state } = run(p, [T0, T0 + 10]);
    expect(usedUnits(p, release(p, state, 2, T0 + 5, T0 + 20), T0 + 20)).toBe(1);
    expect(usedUnits(p, release(p, state, 1, T0 - 1, T0 + 20), T0 + 20)).toBe(2);
  });

  it("frees nothing when the released slot has already expired", () => {
    const p = policy(2, 1_000);
    const { state } = run(p, [T0, T0 + 500]);
    const later = release(p, state, 1, T0, T0 + 1_200);
    expect(usedUnits(p, later, T0 + 1_200)).toBe(1);
    expect(decide(p, later, 2, T0 + 1_200).decision.allowed).toBe(false);
  });

  it("keeps a renewed slot held slotTtl after its renewal, where the unrenewed one would have expired", () => {
    const p = policy(1, 1_000);
    const { state } = run(p, [T0]);
    const renewed = renewConcurrency(p, state as ConcurrencyState, 1, [T0], T0 + 900, T0 + 900)!;
    expect(renewed.renewedAt).toBe(T0 + 900);
    expect(decide(p, renewed.state, 1, T0 + 1_899).decision.allowed).toBe(false);
    expect(decide(p, renewed.state, 1, T0 + 1_900).decision.allowed).toBe(true);
  });

  it("renews only slots at exactly the times given, never an earlier request's, and takes none anew", () => {
    const p = policy(3, 60_000);
    const { state } = run(p, [T0, T0 + 10]);
    expect(renewConcurrency(p, state as ConcurrencyState, 1, [T0 + 5], T0 + 20, T0 + 20)).toBeUndefined();
    const renewed = renewConcurrency(p, state as ConcurrencyState, 1, [T0], T0 + 20, T0 + 20)!;
    expect(usedUnits(p, renewed.state, T0 + 20)).toBe(2);
    expect(usedUnits(p, release(p, renewed.state, 1, T0 + 10, T0 + 30), T0 + 30)).toBe(1);
    expect(usedUnits(p, release(p, renewed.state, 1, T0 + 20, T0 + 30), T0 + 30)).toBe(1);
  });

  it("finds slots a renewal moved though its answer was lost, and answers a repeated renewal as applied", () => {
    const p = policy(2, 60_000);
    const { state } = run(p, [T0, T0 + 10]);
    const moved = renewConcurrency(p, state as ConcurrencyState, 1, [T0 + 10], T0 + 20_000, T0 + 20_000)!.state;
    const again = renewConcurrency(p, moved, 1, [T0 + 20_000, T0 + 10], T0 + 40_000, T0 + 40_000)!;
    expect(again.renewedAt).toBe(T0 + 40_000);
    expect(usedUnits(p, again.state, T0 + 40_000)).toBe(2);
    expect(decide(p, again.state, 1, T0 + 60_000).decision.allowed).toBe(true);
    expect(renewConcurrency(p, again.state, 1, [T0 + 10], T0 + 40_000, T0 + 40_001)?.renewedAt).toBe(T0 + 40_000);
  });

  it("renews nothing once the slot has expired or been given back", () => {
    const p = policy(2, 1_000);
    const { state } = run(p, [T0]);
    expect(renewConcurrency(p, state as ConcurrencyState, 1, [T0], T0 + 1_000, T0 + 1_000)).toBeUndefined();
    expect(renewConcurrency(p, release(p, state, 1, T0, T0 + 5) as ConcurrencyState, 1, [T0], T0 + 10, T0 + 10)).toBeUndefined();
    expect(renewConcurrency(p, undefined, 1, [T0], T0 + 10, T0 + 10)).toBeUndefined();
  });

  it("holds slots taken under a longer slotTtl for that long, and takes the shorter one once none is held", () => {
    const [long, short] = [policy(1, 60_000), policy(1, 5_000)];
    const { state } = run(long, [T0]);
    expect(decide(short, state, 1, T0 + 10_000).decision.allowed).toBe(false);
    const freed = release(short, state, 1, T0, T0 + 10_000);
    const next = decide(short, freed, 1, T0 + 11_000).state;
    expect(decide(short, next, 1, T0 + 15_999).decision.allowed).toBe(false);
    expect(decide(short, next, 1, T0 + 16_000).decision.allowed).toBe(true);
  });

  it("never changes a state another decision already made from it", () => {
    const p = policy(4, 60_000);
    const { state } = run(p, [T0, T0 + 1]);
    const before = peek(p, state, T0 + 2);
    decide(p, state, 2, T0 + 2);
    release(p, state, 1, T0, T0 + 2);
    adjust(p, state, 1, T0 + 1, T0 + 2);
    expect(peek(p, state, T0 + 2)).toEqual(before);
  });

  it("denies a cost above the limit, telling it to wait one slot TTL", () => {
    expect(decide(policy(3, 60_000), undefined, 4, T0).decision).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });

  it("holds another algorithm's used units as slots taken at the change, and carries its slots to another as used", () => {
    const window: Policy = { algorithm: "sliding-window", limit: 5, periodMs: 60_000, burst: 5, buckets: 1 };
    const p = policy(5, 30_000);
    const counted = run(window, [T0, T0, T0]).state;
    const slots = carryOver(window, counted, p, T0 + 1);
    expect(usedUnits(p, slots!, T0 + 30_000)).toBe(3);
    expect(usedUnits(p, slots!, T0 + 30_001)).toBe(0);
    expect(usedUnits(window, carryOver(p, slots, window, T0 + 2)!, T0 + 2)).toBe(3);
  });
});

/** The obvious model: every admitted request, live from its admission until it is released or slotTtl has passed. */
class ConcurrencyModel {
  private readonly held = new Map<number, { at: number; cost: number }>();
  constructor(
    private readonly limit: number,
    private readonly slotTtlMs: number,
  ) {}

  inFlight(now: number): number {
    let sum = 0;
    for (const s of this.held.values()) if (s.at + this.slotTtlMs > now) sum += s.cost;
    return sum;
  }

  /** Decides request `id`: what the algorithm must answer. */
  decide(id: number, cost: number, now: number): Pick<Decision, "allowed" | "remaining" | "retryAfter" | "moreAt" | "resetAt"> {
    const used = this.inFlight(now);
    const allowed = used + cost <= this.limit;
    if (allowed && cost > 0) this.held.set(id, { at: now, cost });
    const live = [...this.held.values()].filter((s) => s.at + this.slotTtlMs > now).sort((a, b) => a.at - b.at);
    const inFlight = used + (allowed ? cost : 0);
    const remaining = Math.max(0, this.limit - inFlight);
    const resetAt = live.length > 0 ? live[live.length - 1]!.at + this.slotTtlMs : now;
    // The first time enough slots have expired for `more` units to fit.
    const fitsAt = (more: number) => {
      let left = inFlight;
      for (const s of live) {
        if (left + more <= this.limit) break;
        left -= s.cost;
        if (left + more <= this.limit) return s.at + this.slotTtlMs;
      }
      return now;
    };
    const moreAt = remaining >= this.limit ? now : fitsAt(remaining + 1);
    const retryAfter = allowed ? 0 : cost > this.limit ? this.slotTtlMs : Math.min(RETRY_HINT_MS, fitsAt(cost) - now);
    return { allowed, remaining, retryAfter, moreAt, resetAt };
  }

  release(id: number): void {
    this.held.delete(id);
  }
}

/** A request (gap in thousandths of the TTL, cost), or the release of the request admitted `release` admissions ago. */
type Op = { gap: number; cost: number } | { release: number };

describe("concurrency properties", () => {
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ gap: fc.nat({ max: 300 }), cost: fc.integer({ min: 1, max: 4 }) }),
    fc.record({ release: fc.nat({ max: 8 }) }),
  );
  const scenario = fc.record({
    limit: fc.integer({ min: 1, max: 12 }),
    slotTtlMs: fc.integer({ min: 1, max: 100_000 }),
    ops: fc.array(op, { maxLength: 200, size: "max" }),
  });

  /** Runs the scenario through the algorithm and the model side by side, calling `check` after every request. */
  function replay({ limit, slotTtlMs, ops }: { limit: number; slotTtlMs: number; ops: Op[] }, check: (d: Decision, expected: ReturnType<ConcurrencyModel["decide"]>, inFlight: number) => void): void {
    const p = policy(limit, slotTtlMs);
    const model = new ConcurrencyModel(limit, slotTtlMs);
    const admitted: { id: number; cost: number; at: number }[] = [];
    let state: LimiterState | undefined;
    let now = T0;
    ops.forEach((o, id) => {
      if ("release" in o) {
        // Each admitted request is released once at most, as the Worker does.
        const held = admitted.splice(admitted.length - 1 - o.release, 1)[0];
        if (!held) return;
        state = release(p, state, held.cost, held.at, now);
        model.release(held.id);
        return;
      }
      now += Math.floor((o.gap * slotTtlMs) / 1_000);
      const outcome = decide(p, state, o.cost, now);
      state = outcome.state;
      check(outcome.decision, model.decide(id, o.cost, now), model.inFlight(now));
      if (outcome.decision.allowed) admitted.push({ id, cost: o.cost, at: countedAt(p, state, now) });
    });
  }

  it("decides exactly as a model of every request in flight, through admissions, releases and expiry", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        replay(s, (decision, expected) => expect(decision).toMatchObject(expected));
      }),
      { numRuns: 500 },
    );
  });

  it("never has more than the limit in flight", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        replay(s, (_, __, inFlight) => expect(inFlight).toBeLessThanOrEqual(s.limit));
      }),
      { numRuns: 300 },
    );
  });

  it("a release at countedAt undoes a decision", () => {
    fc.assert(
      fc.property(scenario, fc.integer({ min: 1, max: 4 }), ({ limit, slotTtlMs, ops }, cost) => {
        const p = policy(limit, slotTtlMs);
        let state: LimiterState | undefined;
        let now = T0;
        for (const o of ops) if ("gap" in o) state = decide(p, state, o.cost, (now += o.gap)).state;
        const outcome = decide(p, state, cost, now);
        if (!outcome.decision.allowed) return;
        expect(peek(p, release(p, outcome.state, cost, countedAt(p, outcome.state, now), now), now)).toEqual(peek(p, state, now));
      }),
      { numRuns: 300 },
    );
  });
});
