/** The strict path: each decision made by the key's Durable Object, concurrent requests coalesced. */
import type { Policy } from "../algorithms";
import type { Rule } from "../config/types";
import type { Decided } from "../durable-object/rate-limiter";
import { limiterStub } from "../durable-object/stub";
import type { Env } from "../env";
import { metrics } from "../metrics/metrics";
import { Breakers, ruleBreaker } from "./breaker";
import { Coalescer } from "./coalescer";

const coalescer = new Coalescer();
const breakers = new Breakers();

/** The arithmetic half of a rule, which is all its Durable Object needs to know. */
export function policyOf(rule: Rule): Policy {
  return { algorithm: rule.algorithm, limit: rule.limit, periodMs: rule.periodMs, burst: rule.burst, buckets: rule.buckets };
}

/**
 * Asks the named object to decide one request, batched with concurrent requests for the same key.
 * Rejects with a TimeoutError when no decision comes within the rule's timeout, and at once while
 * the object's breaker, or the rule's, is open after failures in a row (see {@link Breakers} and
 * {@link ruleBreaker}).
 */
export async function decideStrict(
  namespace: Env["LIMITER"],
  objectName: string,
  rule: Rule,
  cost: number,
  waitUntil: (promise: Promise<unknown>) => void,
): Promise<Decided> {
  const now = Date.now();
  const wholeRule = ruleBreaker(rule.name);
  const wait = Math.max(breakers.waitFor(objectName, now), wholeRule.waitFor(now));
  if (wait > 0) throw new Error(`object unavailable; next attempt in ${wait}ms`);
  const call = (name: string, policy: Policy, costs: number[]) => {
    metrics.count("floodgate_durable_object_calls_total", { method: "decide" });
    return limiterStub(namespace, name).decide(policy, costs);
  };
  try {
    const decided = await coalescer.decide(call, objectName, policyOf(rule), cost, { timeoutMs: rule.timeoutMs, waitUntil });
    breakers.succeeded(objectName);
    wholeRule.succeeded();
    return decided;
  } catch (error) {
    breakers.failed(objectName, rule.timeoutMs, Date.now());
    wholeRule.failed(objectName, rule.timeoutMs, Date.now());
    throw error;
  }
}

/** Gives back what a request took at the named object, when another rule denied it. */
export async function refundStrict(
  namespace: Env["LIMITER"],
  objectName: string,
  rule: Rule,
  units: number,
  countedAt: number,
): Promise<void> {
  metrics.count("floodgate_durable_object_calls_total", { method: "refund" });
  await limiterStub(namespace, objectName).refund(policyOf(rule), units, countedAt);
}
