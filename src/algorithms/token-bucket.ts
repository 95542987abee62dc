/** Token bucket: lazy refill of `limit` units per period up to `burst`, in exact fractional tokens. */
import type { Outcome, Policy, TokenBucketState, WarmingBucketState } from "./types";
import { takenAt } from "./taken-at";
import { adjustWarmingBucket, levelOfWarming, usedWarmingBucket, warmFrom, warmingBucket } from "./warmup";

type Stored = TokenBucketState | WarmingBucketState | undefined;

/**
 * Decides one request of `cost` units at `now` (epoch ms). A request that costs more than the
 * tokens left is denied and drains nothing.
 *
 * Tokens are counted in units of 1/periodMs, so a refill of `limit` tokens per period is exactly
 * `limit` units per millisecond: no floating-point drift, decisions reproducible to the token.
 *
 * @example
 * const { decision, state } = tokenBucket({ algorithm: "token-bucket", limit: 5, periodMs: 60_000, burst: 10 }, undefined, 1, Date.now());
 */
export function tokenBucket(
  policy: Policy,
  kept: Stored,
  cost: number,
  now: number,
): Outcome<TokenBucketState | WarmingBucketState> {
  if (policy.warmupMs) return warmingBucket(policy, warming(policy, kept, now), cost, now);
  const stored = plain(kept, now);
  const level = levelAt(policy, stored, now);
  const need = cost * policy.periodMs;
  const allowed = level >= need;
  const next = bucketAt(policy, stored, allowed ? level - need : level, now);
  const remaining = Math.max(0, Math.floor(next.level / policy.periodMs));
  const missing = capacity(policy) - next.level;
  const resetAt = next.updatedAt + Math.ceil(missing / policy.limit);
  // The next whole token: when the level reaches (remaining + 1) tokens; a full bucket gets none.
  const moreAt = missing <= 0 ? next.updatedAt : next.updatedAt + Math.ceil(((remaining + 1) * policy.periodMs - next.level) / policy.limit);
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the capacity never fits; it is told to wait one period rather than forever.
  const fits = cost <= policy.burst;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  // Counted from the state's time, later than now when the clock stepped back behind it.
  const retryAfter = fits ? next.updatedAt - now + Math.ceil((need - next.level) / policy.limit) : policy.periodMs;
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter, reason }, state: next };
}

/**
 * Takes `units` from the bucket (negative to give them back) with no decision: refunds of requests
 * another rule denied, and hits an isolate admitted on its own. Taking may leave the bucket in
 * debt, which refill pays off before anything more is admitted; giving back stops at `burst`.
 *
 * Units taken at `at`, before now (an isolate's report), are taken then, or when the state was last
 * changed if that is later (see {@link takenAt}): the bucket is kept as of that time, so that the
 * next report's units are taken at theirs. A take leaves the bucket short of full by at most
 * `owedAtMost` units, and never less short than it was: what `onError` admitted while the object
 * was away costs at most a period's wait (see `mostOwed`). Given back, or in a warming bucket,
 * units count at `now`, the cautious side: given back early, they could refill a bucket past what
 * it held (a warmup is strict-only, so no isolate reports units to one late).
 */
export function adjustTokenBucket(
  policy: Policy,
  kept: Stored,
  units: number,
  at: number,
  now: number,
  owedAtMost = Number.POSITIVE_INFINITY,
): TokenBucketState | WarmingBucketState {
  if (policy.warmupMs) {
    const warm = warming(policy, kept, now);
    // Owing is counted from full, as below: a take past what the bucket may owe is taken only up to it.
    const taken = units > 0 ? Math.max(0, Math.min(units, owedAtMost - (warm ? usedWarmingBucket(policy, warm, now) : 0))) : units;
    return adjustWarmingBucket(policy, warm, taken, now);
  }
  const stored = plain(kept, now);
  const taken = units * policy.periodMs;
  if (taken <= 0) return bucketAt(policy, stored, Math.min(capacity(policy), levelAt(policy, stored, now) - taken), now);
  const when = takenAt(stored, at, now);
  const level = levelAt(policy, stored, when);
  const floor = capacity(policy) - owedAtMost * policy.periodMs;
  return { algorithm: "token-bucket", periodMs: policy.periodMs, burst: policy.burst, level: Math.min(level, Math.max(level - taken, floor)), updatedAt: when };
}

/** Whole tokens taken from a full bucket at `now`, rounded up (more than `burst` while in debt): what a change of rule carries over. */
export function usedTokenBucket(policy: Policy, kept: TokenBucketState | WarmingBucketState, now: number): number {
  const warm = policy.warmupMs ? warming(policy, kept, now) : undefined;
  if (warm) return usedWarmingBucket(policy, warm, now);
  const stored = plain(kept, now);
  return Math.max(0, Math.ceil((capacity(policy) - levelAt(policy, stored, now)) / policy.periodMs));
}

/** A plain bucket's state as a warming one: a rule that gains a warmup under a live key (see {@link warmFrom}). */
function warming(policy: Policy, stored: Stored, now: number): WarmingBucketState | undefined {
  if (!stored || "warmupMs" in stored) return stored;
  return warmFrom(policy, levelAt(policy, stored, now), Math.max(now, stored.updatedAt));
}

/** A warming bucket's state as a plain one, keeping its level: a rule that loses its warmup under a live key. */
function plain(stored: Stored, now: number): TokenBucketState | undefined {
  if (!stored || !("warmupMs" in stored)) return stored;
  return { algorithm: "token-bucket", periodMs: stored.periodMs, burst: stored.burst, ...levelOfWarming(stored, now) };
}

function capacity(policy: Policy): number {
  return policy.burst * policy.periodMs;
}

/**
 * The state holding `level` at `now` (or at the stored update, if the clock stepped back). Levels
 * are computed as plain numbers and the state built once: a decision makes one object, not two.
 */
function bucketAt(policy: Policy, stored: TokenBucketState | undefined, level: number, now: number): TokenBucketState {
  return { algorithm: "token-bucket", periodMs: policy.periodMs, burst: policy.burst, level, updatedAt: stored ? Math.max(now, stored.updatedAt) : now };
}

/**
 * A stored level in the policy's terms. A changed period changes the unit tokens are counted in; a
 * changed burst keeps what was taken, not what is left, as every algorithm keeps what was used: a
 * lowered burst applies at once, a raised one adds its extra room (README: changing a rule under
 * live keys). What was taken is rounded up to a 1/periodMs of a token (in floating point, so to
 * within one such sub-unit either way): a conversion adds no whole token.
 */
function levelUnder(policy: Policy, stored: TokenBucketState): number {
  // A state kept before the bucket recorded its burst: its tokens are kept as they were.
  const burst = stored.burst ?? policy.burst;
  if (stored.periodMs === policy.periodMs && burst === policy.burst) return stored.level;
  const taken = burst * stored.periodMs - stored.level;
  return capacity(policy) - Math.ceil((taken / stored.periodMs) * policy.periodMs);
}

/**
 * The bucket's level at `now`, in units of 1/periodMs, refilled since its last update; a `now`
 * before that update (clock skew) adds nothing. A missing bucket is full.
 */
function levelAt(policy: Policy, stored: TokenBucketState | undefined, now: number): number {
  const full = capacity(policy);
  if (!stored) return full;
  const level = levelUnder(policy, stored);
  const elapsed = Math.max(0, now - stored.updatedAt);
  // Compared by division so that a long idle key cannot overflow elapsed × limit.
  if (level >= full || elapsed >= Math.ceil((full - level) / policy.limit)) return full;
  return level + elapsed * policy.limit;
}
