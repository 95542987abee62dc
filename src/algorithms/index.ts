/** One entry point over every algorithm: decide, adjust and peek by the policy's algorithm name. */
import { adjustSlidingWindow, bucketStartOf, countedAtSlidingWindow, slidingWindow } from "./sliding-window";
import { adjustTokenBucket, tokenBucket } from "./token-bucket";
import type { Decision, LimiterState, Outcome, Policy } from "./types";

export type * from "./types";

/** Decides one request of `cost` units at `now`; state left by another algorithm is started afresh. */
export function decide(policy: Policy, state: LimiterState | undefined, cost: number, now: number): Outcome {
  if (policy.algorithm === "sliding-window") {
    return slidingWindow(policy, state?.algorithm === "sliding-window" ? state : undefined, cost, now);
  }
  return tokenBucket(policy, state?.algorithm === "token-bucket" ? state : undefined, cost, now);
}

/** Counts `units` taken at `at` (negative: given back) with no decision; see each algorithm's adjust. */
export function adjust(
  policy: Policy,
  state: LimiterState | undefined,
  units: number,
  at: number,
  now: number,
): LimiterState {
  if (policy.algorithm === "sliding-window") {
    return adjustSlidingWindow(policy, state?.algorithm === "sliding-window" ? state : undefined, units, at, now);
  }
  return adjustTokenBucket(policy, state?.algorithm === "token-bucket" ? state : undefined, units, now);
}

/**
 * The time to give back units decided at `now` with, given the state after the decision: the time
 * the algorithm counted them at, which is later than `now` when the clock stepped back behind the
 * state. Token buckets take refunds whenever they come, so for them it is `now`.
 */
export function countedAt(policy: Policy, state: LimiterState, now: number): number {
  return state.algorithm === "sliding-window" ? countedAtSlidingWindow(policy, state, now) : now;
}

/**
 * The key's standing at `now`, consuming nothing: `remaining` and `resetAt` as they are, `allowed`
 * and `retryAfter` for a request of one unit.
 */
export function peek(policy: Policy, state: LimiterState | undefined, now: number): Decision {
  const { remaining, resetAt } = decide(policy, state, 0, now).decision;
  return { ...decide(policy, state, 1, now).decision, remaining, resetAt };
}

/**
 * Where units taken at `t` are filed when they are reported later: the start of `t`'s bucket for a
 * sliding window, so that reports from one bucket add up to one entry; a token bucket takes units
 * when it is told, whatever their time, so for it every `t` files under 0.
 */
export function slotOf(policy: Policy, t: number): number {
  return policy.algorithm === "sliding-window" ? bucketStartOf(policy, t) : 0;
}
