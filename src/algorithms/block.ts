/** A rule's `block` (a penalty box): once the rule denies a key at its limit, every request for the key is denied until the block has passed. */
import { peek } from "./index";
import type { Decision, LimiterState, Policy } from "./types";

/**
 * When a block starts with this decision: a denial at the limit, on a policy with `blockMs`. A
 * request that costs more than the rule can ever admit, or one decided by `onError`, starts none.
 */
export function blockStart(policy: Policy, decision: Decision, now: number): number | undefined {
  return policy.blockMs !== undefined && !decision.allowed && decision.reason === "limit" ? now + policy.blockMs : undefined;
}

/** The denial of any request while the key is blocked until `until`: it says when the block ends. */
export function blockedDecision(policy: Policy, state: LimiterState | undefined, until: number, now: number): Decision {
  const { resetAt } = peek(policy, state, now);
  return { allowed: false, limit: policy.limit, remaining: 0, resetAt: Math.max(resetAt, until), moreAt: until, retryAfter: until - now, reason: "blocked" };
}
