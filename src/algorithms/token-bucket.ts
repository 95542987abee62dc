/** Token bucket: lazy refill of `limit` units per period up to `burst`, in exact fractional tokens. */
import type { Outcome, Policy, TokenBucketState } from "./types";

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
  stored: TokenBucketState | undefined,
  cost: number,
  now: number,
): Outcome<TokenBucketState> {
  const state = refill(policy, stored, now);
  const need = cost * policy.periodMs;
  const allowed = state.level >= need;
  const next: TokenBucketState = allowed
    ? { algorithm: "token-bucket", periodMs: state.periodMs, level: state.level - need, updatedAt: state.updatedAt }
    : state;
  const remaining = Math.max(0, Math.floor(next.level / policy.periodMs));
  const resetAt = next.updatedAt + Math.ceil((capacity(policy) - next.level) / policy.limit);
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, retryAfter: 0 }, state: next };
  // A cost above the capacity never fits; it is told to wait one period rather than forever.
  const fits = cost <= policy.burst;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  const retryAfter = fits ? Math.ceil((need - next.level) / policy.limit) : policy.periodMs;
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, retryAfter, reason }, state: next };
}

/**
 * Takes `units` from the bucket (negative to give them back) with no decision: refunds of requests
 * another rule denied, and hits an isolate admitted on its own. Taking may leave the bucket in
 * debt, which refill pays off before anything more is admitted; giving back stops at `burst`.
 */
export function adjustTokenBucket(
  policy: Policy,
  stored: TokenBucketState | undefined,
  units: number,
  now: number,
): TokenBucketState {
  const state = refill(policy, stored, now);
  const level = Math.min(capacity(policy), state.level - units * policy.periodMs);
  return { ...state, level };
}

function capacity(policy: Policy): number {
  return policy.burst * policy.periodMs;
}

/** Brings the bucket up to `now`; a `now` before the last refill (clock skew) adds nothing. */
function refill(policy: Policy, stored: TokenBucketState | undefined, now: number): TokenBucketState {
  const full = capacity(policy);
  if (!stored) return { algorithm: "token-bucket", periodMs: policy.periodMs, level: full, updatedAt: now };
  // A changed period changes the unit tokens are counted in; converting keeps the tokens themselves.
  const level =
    stored.periodMs === policy.periodMs ? stored.level : Math.floor((stored.level / stored.periodMs) * policy.periodMs);
  const elapsed = Math.max(0, now - stored.updatedAt);
  const updatedAt = Math.max(now, stored.updatedAt);
  // Compared by division so that a long idle key cannot overflow elapsed × limit.
  if (level >= full || elapsed >= Math.ceil((full - level) / policy.limit)) {
    return { algorithm: "token-bucket", periodMs: policy.periodMs, level: full, updatedAt };
  }
  return { algorithm: "token-bucket", periodMs: policy.periodMs, level: level + elapsed * policy.limit, updatedAt };
}
