/** A rule's `newKeysPerSecond`: how many keys this isolate starts tracking per second; the rest share one key. */
import { decide, type LimiterState, type Policy } from "../algorithms";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";
import { metrics } from "../metrics/metrics";

/**
 * The key a request is counted under when its own is new to this isolate and the rule's
 * `newKeysPerSecond` is spent: one bucket for all of them, as `#none` is for a missing part. Real
 * keys have `#` escaped, so it never equals one.
 */
export const OVERFLOW_KEY = "#overflow";

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
 * isolate per second, and what exceeds it is limited together, never let through.
 */
export function admitKey(rule: Rule, key: string, now: number): string {
  const perSecond = rule.newKeysPerSecond;
  if (perSecond === null) return key;
  let admission = admissions.get(rule.name);
  if (admission?.perSecond !== perSecond) {
    admission = { perSecond, known: new LruTable<true>(KNOWN_KEYS, () => undefined), allowance: undefined };
    admissions.set(rule.name, admission);
  }
  if (admission.known.get(key)) return key;
  const policy: Policy = { algorithm: "token-bucket", limit: perSecond, periodMs: 1_000, burst: perSecond, buckets: 1 };
  const { decision, state } = decide(policy, admission.allowance, 1, now);
  admission.allowance = state;
  if (!decision.allowed) {
    metrics.count("floodgate_key_overflows_total", { rule: rule.name });
    return OVERFLOW_KEY;
  }
  admission.known.set(key, true);
  return key;
}
