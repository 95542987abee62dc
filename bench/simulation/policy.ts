/** The two shapes the simulation needs from modules Node cannot type-check without the Workers types. */
import type { Policy } from "../../src/algorithms";
import type { Rule } from "../../src/config/types";

/**
 * src/strict/index.ts `policyOf` (lines 24–29): the arithmetic half of a rule, all its object needs.
 * That module reaches the Durable Object stub, whose types are the Workers runtime's, so its lines
 * are mirrored here.
 */
export function policyOf(rule: Rule): Policy {
  const policy: Policy = { algorithm: rule.algorithm, limit: rule.limit, periodMs: rule.periodMs, burst: rule.burst, buckets: rule.buckets };
  if (rule.delay !== undefined && rule.delay < rule.burst) policy.delay = rule.delay;
  if (rule.blockMs !== null) policy.blockMs = rule.blockMs;
  if (rule.warmupMs !== undefined) policy.warmupMs = rule.warmupMs;
  return policy;
}

export type { Decided } from "../../src/algorithms/block";
