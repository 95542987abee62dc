/** Checks the fast replicas against floodgate's own code: same decisions, same estimates, request by request. */
import { adjust, decide, type LimiterState, type Policy } from "../../src/algorithms/index";
import type { Estimator } from "./limiters";
import { FixedWindow, Gcra, SlidingLog, SlidingWindow, TokenBucket, WarmingBucket } from "./limiters";
import type { Kept, Mode } from "./replay";

export interface Verification {
  sources: number;
  requests: number;
  /** floodgate calls made (decide, plus adjust where every attempt counts) */
  calls: number;
}

/** The policy floodgate would be given for this replica, or undefined for a limiter floodgate does not have. */
export function policyOf(e: Estimator, limit: number, periodMs: number): Policy | undefined {
  if (e instanceof SlidingWindow) return { algorithm: "sliding-window", limit, periodMs, burst: limit, buckets: e.buckets };
  if (e instanceof TokenBucket) return { algorithm: "token-bucket", limit, periodMs, burst: limit, buckets: 1 };
  if (e instanceof FixedWindow) return { algorithm: "fixed-window", limit, periodMs, burst: limit, buckets: 1 };
  if (e instanceof SlidingLog) return { algorithm: "sliding-log", limit, periodMs, burst: limit, buckets: 1 };
  if (e instanceof WarmingBucket) return { algorithm: "token-bucket", limit, periodMs, burst: limit, buckets: 1, warmupMs: e.warmupMs };
  if (e instanceof Gcra) return { algorithm: "gcra", limit, periodMs, burst: e.burst, buckets: 1 };
  return undefined;
}

/**
 * Replays `times` through floodgate's `decide` (and `adjust`, to count denied requests when every
 * attempt counts) and throws at the first request where floodgate's decision or its `remaining`
 * differs from what the replica decided and estimated.
 */
export function verifySource(
  e: Estimator,
  policy: Policy,
  times: Float64Array,
  kept: Record<Mode, Kept>,
  tally: Verification,
  sourceId: number,
): void {
  for (const mode of ["every-attempt", "admitted-only"] as const) {
    const { allowed: expectAllowed, used } = kept[mode];
    let state: LimiterState | undefined;
    for (let i = 0; i < times.length; i++) {
      const now = times[i]!;
      const outcome = decide(policy, state, 1, now);
      tally.calls++;
      const allowed = outcome.decision.allowed;
      state = outcome.state;
      if (!allowed && mode === "every-attempt") {
        state = adjust(policy, state, 1, now, now);
        tally.calls++;
      }
      const S = e.scale;
      const expectRemaining = Math.max(0, Math.floor((policy.limit * S - used[i]! - (allowed ? S : 0)) / S));
      if (allowed !== (expectAllowed[i] === 1) || outcome.decision.remaining !== expectRemaining) {
        throw new Error(
          `accuracy: the ${e.name} replica disagrees with floodgate's decide() (${mode}, source ${sourceId}, ` +
            `request ${i} at ${now}): floodgate allowed=${allowed} remaining=${outcome.decision.remaining}, ` +
            `replica allowed=${expectAllowed[i] === 1} remaining=${expectRemaining}. Update bench/accuracy/limiters.ts ` +
            `to follow src/algorithms.`,
        );
      }
    }
  }
}
