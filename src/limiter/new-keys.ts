/** A rule's `newKeysPerSecond`: how many keys this isolate starts tracking per second; the rest share one key. */
import { decide, peek, type LimiterState, type Policy } from "../algorithms";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";
import { metrics } from "../metrics/metrics";
import { OVERFLOW_KEY } from "../routing/key-text";

/** Keys per rule an isolate remembers as tracked; one pushed out counts as new when it comes back. */
const KNOWN_KEYS = 10_000;

interface Admission {
  perSecond: number;
  known: LruTable<true>;
  /** the rule's allowance of new keys: a token bucket of `perSecond` per second */
  allowance: LimiterState | undefined;
}

const admissions = new Map<string, Admission>();

/**
 * The key to count a request under: its own when this isolate already tracks it or the rule may
 * start tracking one more this second, otherwise {@link OVERFLOW_KEY}. Each new key creates a
 * Durable Object, so a client rotating keys costs at most `newKeysPerSecond` objects per
 * isolate per second, and what exceeds it is limited together, never let through. A key the
 * rule's `overrides` name is always its own: the operator listed it, so it is no client's rotation.
 */
export function admitKey(rule: Rule, key: string, now: number): string {
  const perSecond = rule.newKeysPerSecond;
  if (perSecond === null || rule.overrides?.has(key)) return key;
  let admission = admissions.get(rule.name);
  if (admission?.perSecond !== perSecond) {
    admission = { perSecond, known: new LruTable<true>(KNOWN_KEYS, () => undefined), allowance: undefined };
    admissions.set(rule.name, admission);
  }
  if (admission.known.get(key)) return key;
  const { decision, state } = decide(allowancePolicy(perSecond), admission.allowance, 1, now);
  admission.allowance = state;
  if (!decision.allowed) {
    metrics.count("floodgate_key_overflows_total", { rule: rule.name });
    return OVERFLOW_KEY;
  }
  admission.known.set(key, true);
  return key;
}

/**
 * The key a one-unit request for `key` would be counted under now, as {@link admitKey} would pick
 * it, starting to track nothing: what a peek reads, so that it tells what a request would get.
 */
export function keyAsPeeked(rule: Rule, key: string, now: number): string {
  const admission = admissions.get(rule.name);
  if (rule.newKeysPerSecond === null || rule.overrides?.has(key) || admission?.perSecond !== rule.newKeysPerSecond || admission.known.peek(key)) return key;
  return peek(allowancePolicy(admission.perSecond), admission.allowance, now).allowed ? key : OVERFLOW_KEY;
}

/** A rule's allowance of new keys: a token bucket of `perSecond` per second. */
function allowancePolicy(perSecond: number): Policy {
  return { algorithm: "token-bucket", limit: perSecond, periodMs: 1_000, burst: perSecond, buckets: 1 };
}
