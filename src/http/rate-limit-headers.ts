/** The rate-limit response headers: which rule to report, and its RateLimit-Policy, RateLimit, X-RateLimit-* and Retry-After. */
import type { Decision } from "../algorithms/types";
import type { Rule } from "../config/types";

/** One applicable rule and the decision it gave for this request. */
export interface RuleDecision {
  rule: Rule;
  decision: Decision;
}

/**
 * The entry to report on an allowed response: the one with the fewest units remaining, the
 * latest `resetAt` among ties (the client will wait longest for it). Undefined when no rule
 * applied.
 *
 * @example
 * mostRestrictive([{ rule: perIp, decision: d1 }, { rule: perKey, decision: d2 }]); // the smaller `remaining`
 */
export function mostRestrictive<E extends RuleDecision>(entries: readonly E[]): E | undefined {
  return pick(entries, (a, b) => a.decision.remaining < b.decision.remaining
    || (a.decision.remaining === b.decision.remaining && a.decision.resetAt > b.decision.resetAt));
}

/**
 * The entry to report on a denial; pass only the denying entries. The one with the largest
 * `retryAfter`, since the request cannot succeed before every denying rule relents; ties go to
 * the latest `resetAt`.
 *
 * @example
 * const denied = entries.filter((e) => !e.decision.allowed);
 * const shown = longestWait(denied); // its Retry-After is the one the client must honour
 */
export function longestWait<E extends RuleDecision>(entries: readonly E[]): E | undefined {
  return pick(entries, (a, b) => a.decision.retryAfter > b.decision.retryAfter
    || (a.decision.retryAfter === b.decision.retryAfter && a.decision.resetAt > b.decision.resetAt));
}

function pick<E>(entries: readonly E[], better: (a: E, b: E) => boolean): E | undefined {
  let best: E | undefined;
  for (const entry of entries) if (best === undefined || better(entry, best)) best = entry;
  return best;
}

/**
 * The headers describing one rule's decision, as PRODUCT.md specifies and following
 * draft-ietf-httpapi-ratelimit-headers-10: `RateLimit-Policy` and `RateLimit` are Structured
 * Field Lists with one item each, the policy name as an sf-string with integer parameters.
 * Seconds are rounded up so a client that waits them is never early. `Retry-After` only on denial.
 *
 * @example
 * rateLimitHeaders(rule, decision, Date.now());
 * // {
 * //   "RateLimit-Policy": '"api-per-key";q=1000;w=60',
 * //   "RateLimit": '"api-per-key";r=0;t=12',
 * //   "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12",
 * //   "Retry-After": "5",
 * // }
 */
export function rateLimitHeaders(rule: Rule, decision: Decision, now: number): Record<string, string> {
  const { name, policy, limit } = fixedParts(rule);
  const remaining = sfInteger(decision.remaining);
  const reset = sfInteger(Math.ceil((decision.resetAt - now) / 1000));
  const headers: Record<string, string> = {
    "RateLimit-Policy": policy,
    "RateLimit": `${name};r=${remaining};t=${reset}`,
    "X-RateLimit-Limit": limit,
    "X-RateLimit-Remaining": String(remaining),
    "X-RateLimit-Reset": String(reset),
  };
  if (!decision.allowed) headers["Retry-After"] = String(Math.max(1, Math.ceil(decision.retryAfter / 1000)));
  return headers;
}

/** What a rule's headers say whatever the decision, rendered once per rule rather than per response. */
const fixed = new WeakMap<Rule, { name: string; policy: string; limit: string }>();

function fixedParts(rule: Rule): { name: string; policy: string; limit: string } {
  let parts = fixed.get(rule);
  if (!parts) {
    const name = sfString(rule.name);
    const limit = sfInteger(rule.limit);
    const policy = `${name};q=${limit};w=${Math.max(1, sfInteger(Math.ceil(rule.periodMs / 1000)))}`;
    fixed.set(rule, (parts = { name, policy, limit: String(limit) }));
  }
  return parts;
}

// Rule names are `[a-z0-9_-]`, which need no escaping; the escape keeps the field valid regardless.
function sfString(s: string): string {
  return `"${s.replace(/[\\"]/g, "\\$&")}"`;
}

const SF_INTEGER_MAX = 999_999_999_999_999;

// An sf-integer has at most 15 digits and no sign; a limit near MAX_SAFE_INTEGER must not break the field.
function sfInteger(n: number): number {
  return Math.min(SF_INTEGER_MAX, Math.max(0, Math.floor(n)));
}
