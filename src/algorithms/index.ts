/** One entry point over every algorithm: decide, adjust and peek by the policy's algorithm name. */
import { adjustSlidingWindow, bucketEndOf, bucketStartOf, countedAtSlidingWindow, slidingWindow, usedSlidingWindow } from "./sliding-window";
import { adjustTokenBucket, tokenBucket, usedTokenBucket } from "./token-bucket";
import { adjustFixedWindow, countedAtFixedWindow, fixedWindow, turnedFixedWindow, usedFixedWindow, windowEndOf, windowStartOf } from "./fixed-window";
import { adjustSlidingLog, countedAtSlidingLog, slidingLog, usedSlidingLog } from "./sliding-log";
import { adjustGcra, gcra, usedGcra } from "./gcra";
import { adjustConcurrency, concurrency, countedAtConcurrency, usedConcurrency } from "./concurrency";
import type { Decision, LimiterState, Outcome, Policy } from "./types";

export type * from "./types";

const KNOWN = `"sliding-window", "token-bucket", "fixed-window", "sliding-log", "gcra" and "concurrency"`;

/**
 * A policy or state names an algorithm this version does not know: one written by a newer Worker
 * version, live beside this one. Guessing would grant the key a quota it may not have, so the call
 * fails and the caller's `onError` policy decides.
 */
export class UnknownAlgorithmError extends Error {
  override readonly name = "UnknownAlgorithmError";

  constructor(algorithm: unknown) {
    super(`unknown algorithm ${JSON.stringify(algorithm)}; this version knows ${KNOWN}`);
  }
}

/**
 * The most units one request can ever be granted under the policy, whatever the key's state: a
 * larger cost is denied with reason "cost-exceeds-capacity" and told to wait one period, by every
 * algorithm alike (token-bucket: its `burst`; gcra: one unit plus its `burst` of tolerance; the
 * others: `limit`).
 */
export function largestCost(policy: Pick<Policy, "algorithm" | "limit" | "burst">): number {
  return policy.algorithm === "token-bucket" ? policy.burst : policy.algorithm === "gcra" ? policy.burst + 1 : policy.limit;
}

/** Decides one request of `cost` units at `now`; state left by another algorithm is started afresh (see {@link carryOver}). */
export function decide(policy: Policy, state: LimiterState | undefined, cost: number, now: number): Outcome {
  switch (policy.algorithm) {
    case "sliding-window":
      return slidingWindow(policy, state?.algorithm === "sliding-window" ? state : undefined, cost, now);
    case "token-bucket":
      return tokenBucket(policy, state?.algorithm === "token-bucket" ? state : undefined, cost, now);
    case "fixed-window":
      return fixedWindow(policy, state?.algorithm === "fixed-window" ? state : undefined, cost, now);
    case "sliding-log":
      return slidingLog(policy, state?.algorithm === "sliding-log" ? state : undefined, cost, now);
    case "gcra":
      return gcra(policy, state?.algorithm === "gcra" ? state : undefined, cost, now);
    case "concurrency":
      return concurrency(policy, state?.algorithm === "concurrency" ? state : undefined, cost, now);
  }
  throw new UnknownAlgorithmError(policy.algorithm);
}

/**
 * The most units a charge (a request's cost known after the fact, see `charge` on LimitResult)
 * may leave a token bucket or GCRA owing: all it holds and a year's refill, within exact
 * arithmetic. Unbounded, one charge on a rule of one unit a day left the key owing for millennia,
 * past the dates an object's alarm takes.
 */
export function mostCharged(policy: Pick<Policy, "algorithm" | "limit" | "burst" | "periodMs">): number {
  return Math.min(largestCost(policy) + Math.floor((CHARGE_DEBT_MS * policy.limit) / policy.periodMs), largestCharge(policy));
}

/**
 * The most units one charge counts: what a window can hold with its arithmetic exact (2^53 − 1
 * unit·ms over the period; for a fixed window, which counts whole units, half of 2^53, so that a
 * count and a charge still add up exactly), well past any limit; more would only deny for the
 * same period. A bucket owes less still ({@link mostCharged}).
 */
export function largestCharge(policy: Pick<Policy, "algorithm" | "periodMs">): number {
  return Math.floor(Number.MAX_SAFE_INTEGER / (policy.algorithm === "fixed-window" ? 2 : policy.periodMs));
}

const CHARGE_DEBT_MS = 365 * 24 * 3_600_000;

/**
 * The most units what `onError` admitted while the object could not be reached may leave a token
 * bucket or GCRA owing: all it holds and one period's refill more, less the one unit that then
 * waits one period. A window forgets what it admitted a period ago; a bucket in debt would not.
 */
export function mostOwed(policy: Pick<Policy, "algorithm" | "limit" | "burst">): number {
  return largestCost(policy) + policy.limit - 1;
}

/**
 * Counts `units` taken at `at` (negative: given back) with no decision; see each algorithm's adjust.
 * A token bucket or GCRA is left owing at most `owedAtMost` units by the take (see {@link mostOwed}).
 */
export function adjust(
  policy: Policy,
  state: LimiterState | undefined,
  units: number,
  at: number,
  now: number,
  owedAtMost = Number.POSITIVE_INFINITY,
): LimiterState {
  switch (policy.algorithm) {
    case "sliding-window":
      return adjustSlidingWindow(policy, state?.algorithm === "sliding-window" ? state : undefined, units, at, now);
    case "token-bucket":
      return adjustTokenBucket(policy, state?.algorithm === "token-bucket" ? state : undefined, units, at, now, owedAtMost);
    case "fixed-window":
      return adjustFixedWindow(policy, state?.algorithm === "fixed-window" ? state : undefined, units, at, now);
    case "sliding-log":
      return adjustSlidingLog(policy, state?.algorithm === "sliding-log" ? state : undefined, units, at, now);
    case "gcra":
      return adjustGcra(policy, state?.algorithm === "gcra" ? state : undefined, units, at, now, owedAtMost);
    case "concurrency":
      return adjustConcurrency(policy, state?.algorithm === "concurrency" ? state : undefined, units, at, now);
  }
  throw new UnknownAlgorithmError(policy.algorithm);
}

/**
 * The state `to` decides from when the key's state was last kept under `from`. Under the same
 * algorithm it is the state itself: each algorithm reads a changed limit, period or bucket count
 * from its own state without forgetting what was used. Under another algorithm it is a fresh
 * state of the new one holding every unit the old one still counted as used, taken at `now`: the
 * units are held a little longer than before, never dropped, so neither a rule changed under live
 * keys nor two Worker versions alternating between algorithms grants a fresh quota.
 */
export function carryOver(from: Policy, state: LimiterState | undefined, to: Policy, now: number): LimiterState | undefined {
  if (state === undefined || from.algorithm === to.algorithm) return state;
  const used = state.algorithm === "fixed-window" ? turnedFixedWindow(state, now) : usedUnits(from, state, now);
  return used > 0 ? adjust(to, undefined, used, now, now) : undefined;
}

/** Units the state counts as used at `now` under its own policy, whole units rounded up. */
export function usedUnits(policy: Policy, state: LimiterState, now: number): number {
  switch (state.algorithm) {
    case "sliding-window":
      return usedSlidingWindow(state, now);
    case "token-bucket":
      return usedTokenBucket(policy, state, now);
    case "fixed-window":
      return usedFixedWindow(state, now);
    case "sliding-log":
      return usedSlidingLog(state, now);
    case "gcra":
      return usedGcra(policy, state, now);
    case "concurrency":
      return usedConcurrency(state, now);
  }
  throw new UnknownAlgorithmError((state as { algorithm: unknown }).algorithm);
}

/**
 * The time to give back units decided at `now` with, given the state after the decision: the time
 * the algorithm counted them at, which is later than `now` when the clock stepped back behind the
 * state. For concurrency it is also what identifies the request's slots when they are released. Token buckets and GCRA take refunds whenever they come, so for them it is `now`.
 */
export function countedAt(policy: Policy, state: LimiterState, now: number): number {
  switch (state.algorithm) {
    case "sliding-window":
      return countedAtSlidingWindow(policy, state, now);
    case "fixed-window":
      return countedAtFixedWindow(state, now);
    case "sliding-log":
      return countedAtSlidingLog(state, now);
    case "concurrency":
      return countedAtConcurrency(state, now);
    default:
      return now;
  }
}

/**
 * Until when a request of `cost` waits, known only from the key's denial of a cheaper one
 * (`denied` units, told to wait until `until`). For a token bucket or GCRA, one emission interval
 * more per unit: exact, or for a warming bucket three, as it never refills slower than a third of
 * its rate (up to three times too long for a warm one). For a fixed window the same: any cost fits
 * the next window. A concurrency key's wait is only a hint: slots come back whenever responses end.
 * Undefined for a sliding window or log, whose units leave as they were taken: only the object
 * knows when enough will have left, and its full quota, a bound, may be a period away.
 */
export function costlierUntil(policy: Policy, denied: number, cost: number, until: number): number | undefined {
  switch (policy.algorithm) {
    case "token-bucket":
    case "gcra":
      return until + Math.ceil(((cost - denied) * policy.periodMs * (policy.warmupMs ? 3 : 1)) / policy.limit);
    case "fixed-window":
    case "concurrency":
      return until;
    case "sliding-window":
    case "sliding-log":
      return undefined;
  }
}

/**
 * The key's standing at `now`, consuming nothing: `remaining`, `resetAt` and `moreAt` as they are,
 * `allowed` and `retryAfter` for a request of one unit.
 */
export function peek(policy: Policy, state: LimiterState | undefined, now: number): Decision {
  const { remaining, resetAt, moreAt } = decide(policy, state, 0, now).decision;
  return { ...decide(policy, state, 1, now).decision, remaining, resetAt, moreAt };
}

type Slots = Pick<Policy, "algorithm" | "periodMs" | "buckets" | "months">;

/**
 * A token bucket's units are filed by the tick of this fraction of its period they were taken in:
 * a report then says when its units went, within a tick, at up to this many entries a period.
 */
const TOKEN_TICKS_PER_PERIOD = 64;

/**
 * Where units taken at `t` are filed when they are reported later: the start of `t`'s bucket for a
 * sliding window and of its window for a fixed window, so that reports from one bucket add up to
 * one entry; `t` itself for a sliding log, which places every unit at its exact time; for a token
 * bucket, the last millisecond of `t`'s tick (see TOKEN_TICKS_PER_PERIOD), the latest it may have
 * been taken, since a bucket that takes units later than they went refills less; GCRA and a
 * concurrency rule, both strict-only, file every `t` under 0.
 */
export function slotOf(policy: Slots, t: number): number {
  switch (policy.algorithm) {
    case "sliding-window":
      return bucketStartOf(policy, t);
    case "fixed-window":
      return windowStartOf(policy, t);
    case "sliding-log":
      return t;
    case "token-bucket": {
      const tick = tokenTickMs(policy);
      return Math.floor(t / tick) * tick + tick - 1;
    }
    default:
      return 0;
  }
}

/**
 * The latest time units filed under `slot` (see {@link slotOf}) may have been taken at: the last
 * millisecond of a sliding window's bucket or of a fixed window's window, the slot itself for a
 * sliding log or a token bucket, and any time at all for GCRA, which files every unit under 0, or
 * for a token bucket's slot 0, which is how an isolate of an earlier version filed every unit.
 */
export function slotEnd(policy: Slots, slot: number): number {
  switch (policy.algorithm) {
    case "sliding-window":
      return bucketEndOf(policy, slot);
    case "fixed-window":
      return windowEndOf(policy, slot) - 1;
    case "sliding-log":
      return slot;
    case "token-bucket":
      return slot === 0 ? Number.POSITIVE_INFINITY : slot;
    default:
      return Number.POSITIVE_INFINITY;
  }
}

/**
 * Whether the algorithm takes units at a time rather than counting them in a slot: a token bucket,
 * which refills for the time since, or GCRA. Units reported late are taken at the latest time they
 * may have gone, and units given back are given back now.
 */
export function takenAtATime(policy: Slots): boolean {
  return policy.algorithm === "token-bucket" || policy.algorithm === "gcra";
}

function tokenTickMs(policy: Slots): number {
  return Math.max(1, Math.floor(policy.periodMs / TOKEN_TICKS_PER_PERIOD));
}

/** Whether two policies are one: the same algorithm with the same figures, so that what one decided the other would too. */
export function samePolicy(a: Policy, b: Policy): boolean {
  return (
    a.algorithm === b.algorithm &&
    a.limit === b.limit &&
    a.periodMs === b.periodMs &&
    a.burst === b.burst &&
    a.buckets === b.buckets &&
    a.months === b.months &&
    a.delay === b.delay &&
    a.blockMs === b.blockMs &&
    a.warmupMs === b.warmupMs
  );
}

/**
 * Whether `asked` may admit what `under` denied: another algorithm or slots, or any figure more
 * generous (a higher limit or burst, a shorter period, block or warm-up, more of a burst passed at
 * once). Otherwise it is as strict or stricter, and denies at least what `under` denies.
 */
export function mayAdmitMore(asked: Policy, under: Policy): boolean {
  if (samePolicy(asked, under)) return false;
  return (
    asked.algorithm !== under.algorithm ||
    asked.buckets !== under.buckets ||
    asked.months !== under.months ||
    asked.limit > under.limit ||
    asked.burst > under.burst ||
    asked.periodMs < under.periodMs ||
    (asked.delay ?? asked.burst) > (under.delay ?? under.burst) ||
    (asked.blockMs ?? 0) < (under.blockMs ?? 0) ||
    (asked.warmupMs ?? 0) < (under.warmupMs ?? 0)
  );
}

/** Whether two policies file units under the same slots (see {@link slotOf}), so that a slot of one is a slot of the other. */
export function sameSlots(a: Slots, b: Slots): boolean {
  return slotShape(a) === slotShape(b);
}

function slotShape(policy: Slots): string {
  switch (policy.algorithm) {
    case "sliding-window":
      return `buckets of ${policy.periodMs / policy.buckets} ms`;
    case "fixed-window":
      return policy.months !== undefined ? `calendar windows of ${policy.months} months` : `windows of ${policy.periodMs} ms`;
    case "sliding-log":
      return "times";
    case "token-bucket":
      return `ticks of ${tokenTickMs(policy)} ms`;
    default:
      return "none";
  }
}
