/** A rule's arithmetic half, which is all its Durable Object and the algorithms need to know. */
import type { Policy } from "../algorithms";
import type { Rule } from "./types";

export function policyOf(rule: Rule): Policy {
  const policy: Policy = { algorithm: rule.algorithm, limit: rule.limit, periodMs: rule.periodMs, burst: rule.burst, buckets: rule.buckets };
  if (rule.delay !== undefined && rule.delay < rule.burst) policy.delay = rule.delay;
  if (rule.blockMs !== null) policy.blockMs = rule.blockMs;
  if (rule.warmupMs !== undefined) policy.warmupMs = rule.warmupMs;
  if (rule.months !== undefined) policy.months = rule.months;
  return policy;
}
