/** A rule's arithmetic half, which is all its Durable Object and the algorithms need to know. */
import type { Policy } from "../algorithms";
import type { Rule } from "./types";

/** The rule's policy, made once per rule: rules are never changed once parsed, and it is asked for on every request. */
export function policyOf(rule: Rule): Policy {
  let policy = policies.get(rule);
  if (policy) return policy;
  policy = { algorithm: rule.algorithm, limit: rule.limit, periodMs: rule.periodMs, burst: rule.burst, buckets: rule.buckets };
  if (rule.delay !== undefined && rule.delay < rule.burst) policy.delay = rule.delay;
  if (rule.blockMs !== null) policy.blockMs = rule.blockMs;
  if (rule.warmupMs !== undefined) policy.warmupMs = rule.warmupMs;
  if (rule.months !== undefined) policy.months = rule.months;
  policies.set(rule, policy);
  return policy;
}

const policies = new WeakMap<Rule, Policy>();

/**
 * The policy's JSON, made once per policy object: what tells policies apart as a key (a strict
 * lane, a peer's policy at its object). A rule's policy is one object, and a peer's stays in the
 * object's index from sync to sync, so most asks find it made.
 */
export function policyKey(policy: Policy): string {
  let key = policyKeys.get(policy);
  if (key === undefined) policyKeys.set(policy, (key = JSON.stringify(policy)));
  return key;
}

const policyKeys = new WeakMap<Policy, string>();
