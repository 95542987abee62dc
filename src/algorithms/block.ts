/** A rule's `block` (a penalty box): once the rule denies a key at its limit, every request for the key is denied until the block has passed. */
import { countedAt, decide, largestCost, peek } from "./index";
import type { Decision, LimiterState, Policy } from "./types";

/**
 * When a block starts with this decision: a denial at the limit, on a policy with `blockMs`. A
 * request that costs more than the rule can ever admit, or one decided by `onError`, starts none.
 */
export function blockStart(policy: Policy, decision: Decision, now: number): number | undefined {
  return policy.blockMs !== undefined && !decision.allowed && decision.reason === "limit" ? now + policy.blockMs : undefined;
}

/** A key's block: when it ends, and when it started (0 and 0: none), so each Worker version reads its end by its own rule (see {@link blockEnd}). */
export interface Block {
  until: number;
  since: number;
}

/**
 * When the key's block ends under `policy`: by the terms it started under, or sooner when the
 * rule's block was removed or shortened since (an operator's way out of a block too long), so
 * each Worker version live frees the key by its own rule.
 */
export function blockEnd(policy: Policy, block: Block): number {
  if (policy.blockMs === undefined) return 0;
  return block.since > 0 ? Math.min(block.until, block.since + policy.blockMs) : block.until;
}

/**
 * The key's block once one starts now, until `until`. A longer one another Worker version's rule
 * started stands: each version's end is read from the start by its own rule.
 */
export function blockFrom(block: Block, until: number, now: number): Block {
  return { until: Math.max(block.until, until), since: now };
}

/**
 * The denial of a request of `cost` while the key is blocked until `until`: it says when that
 * request can pass, which is when the block ends or, for a block shorter than the wait the
 * algorithm itself gives, when the key has room for the request (a client retrying when the block
 * ended would be denied again, and blocked again); `moreAt` says the same of one unit. A cost the
 * rule can never admit is told when the block ends, as any request.
 */
export function blockedDecision(policy: Policy, state: LimiterState | undefined, until: number, now: number, cost = 1): Decision {
  const one = peek(policy, state, now);
  const asked = cost > 1 && cost <= largestCost(policy) ? decide(policy, state, cost, now).decision : one;
  const passesAt = (d: Decision) => Math.max(until, d.allowed ? now : now + d.retryAfter);
  const at = passesAt(asked);
  return { allowed: false, limit: policy.limit, remaining: 0, resetAt: Math.max(one.resetAt, at), moreAt: passesAt(one), retryAfter: at - now, reason: "blocked" };
}

/** One decision of a batch, and when its units were counted, so a refund finds their window. */
export interface Decided {
  decision: Decision;
  countedAt: number;
}

/**
 * Decides a batch of costs for one key in order, each as if it had arrived alone, under the key's
 * block: a denial at the limit starts it, and while it lasts every request is denied.
 */
export function decideBatch(
  policy: Policy,
  stored: LimiterState | undefined,
  blockedUntil: number,
  costs: readonly number[],
  now: number,
): { state: LimiterState | undefined; blockedUntil: number; results: Decided[] } {
  let state = stored;
  let until = blockedUntil;
  const results = costs.map((cost) => {
    if (now < until) return { decision: blockedDecision(policy, state, until, now, cost), countedAt: now };
    const outcome = decide(policy, state, cost, now);
    state = outcome.state;
    const block = blockStart(policy, outcome.decision, now);
    if (block !== undefined) until = block;
    const decision = block === undefined ? outcome.decision : blockedDecision(policy, state, block, now, cost);
    return { decision, countedAt: countedAt(policy, outcome.state, now) };
  });
  return { state, blockedUntil: until, results };
}
