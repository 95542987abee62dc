/** What a rule decides when its Durable Object fails or is too slow: its `onError` policy. */
import { adjust, type Decision } from "../algorithms";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";
import { policyOf } from "../config/policy";
import { decideShare, type Counters, type Share } from "./local-share";

/** Keys the local fallback tracks at once, by their tracked name (`trackedName`: two namespaces' objects of one name count apart); the oldest is forgotten first. */
const FALLBACK_KEYS = 10_000;
const fallback = new LruTable<Counters>(FALLBACK_KEYS, () => undefined);

/**
 * The decision when the object cannot answer. `allow` lets the request through and `deny` refuses
 * it for a second. `local` (the default) limits from this isolate's own counters: the rule's limit
 * divided among the isolates the object last reported for the key (fast mode; 1 for strict, which
 * never learns it), so an outage neither opens the gate to abusers nor takes the API down; see
 * ./local-share for where a share starts, and when there is none to divide (then it refuses as `deny`).
 */
export function onErrorDecision(rule: Rule, tracked: string, cost: number, known: Share, now: number): Decision {
  switch (rule.onError) {
    case "allow":
      return { allowed: true, limit: rule.limit, remaining: rule.limit, resetAt: now, moreAt: now, retryAfter: 0, reason: "error" };
    case "deny":
      return refusal(rule, now);
    case "local": {
      const outcome = decideShare(policyOf(rule), fallback.get(tracked), cost, known, now);
      if (!outcome) return refusal(rule, now);
      fallback.set(tracked, outcome.counters);
      return { ...outcome.decision, limit: rule.limit, reason: "error" };
    }
  }
}

function refusal(rule: Rule, now: number): Decision {
  return { allowed: false, limit: rule.limit, remaining: 0, resetAt: now + 1_000, moreAt: now + 1_000, retryAfter: 1_000, reason: "error" };
}

/**
 * Forgets the local fallback's counters of a key that was reset: a strict key's hold what its
 * object last said (see ./local-share), which the reset took back, and would refuse the key's
 * fresh quota while the object fails.
 */
export function forgetFallback(tracked: string): void {
  fallback.delete(tracked);
}

/**
 * Gives back slots a concurrency rule's `local` fallback took: the newest taken at or before `now`.
 * A window's local units leave with their window, but a slot would be held a whole `slotTtl`.
 */
export function releaseLocal(rule: Rule, tracked: string, cost: number, now: number): void {
  const counters = fallback.get(tracked);
  if (counters) fallback.set(tracked, { ...counters, state: adjust(policyOf(rule), counters.state, -cost, now, now) });
}
