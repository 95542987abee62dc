/** LimitResult: what a decision tells the code that asked for it, the same from the binding, the library and the middleware. */
import type { Decision, Reason } from "../algorithms";
import type { Rule } from "../config/types";

/** A response's headers as `settle` takes them: `response.headers`, or a plain object of names to values (what crosses the service binding). */
export type ResponseHeaders = Headers | Record<string, string> | [string, string][];

/**
 * The answer to `limit` and `peek`. A superset of Cloudflare's `RateLimitOutcome` (`{ success }`),
 * so code written for Cloudflare's rate-limiting binding reads it unchanged.
 *
 * @example
 * const { success, remaining, retryAfter } = await env.FLOODGATE.limit({ key: userId });
 * if (!success) return new Response("slow down", { status: 429, headers: { "Retry-After": String(Math.ceil(retryAfter / 1000)) } });
 */
export interface LimitResult {
  /** whether the units were granted */
  success: boolean;
  /** the rule's `limit` */
  limit: number;
  /** whole units still available after this decision */
  remaining: number;
  /** epoch ms at which the key is back to its full quota if it sends nothing more */
  reset: number;
  /** ms until a request of this cost would be granted; 0 when granted */
  retryAfter: number;
  /** the rule's name */
  rule: string;
  /**
   * why, when it needs saying: "limit", "cost-exceeds-capacity", "local", "cache", "error",
   * "blocked", "dry-run" (a dry-run rule would have denied: `success` is true all the same, and
   * nothing was consumed; see the README), or "unlimited" (the rule's `overrides` leave the key
   * unlimited: nothing was counted, and the figures are the rule's quota, whole)
   */
  reason?: Reason | "dry-run" | "unlimited";
  /**
   * present when a concurrency rule granted slots: call it once the work they guard is over (your
   * response sent, or failed) to give them back; a slot never given back is freed after the rule's
   * `slotTtl`. Only the first call gives anything back. Over the service binding it is an RPC stub.
   */
  release?: () => Promise<void>;
  /**
   * present when the rule counts by response (`count`: "failed" or "successful") or reads the
   * request's real cost from it (`responseCost`, a rule of RATE_LIMIT_RULES named over the
   * binding) and granted the units: call it once you know how the request ended, with the
   * response's HTTP status or whether it succeeded (true or false), and for `responseCost` the
   * response's headers. The units are given back if the rule does not count such a request (a
   * success, for a rule counting failed logins), and charged the difference the header says. Only
   * the first call does anything; never called, the units stay spent. Over the service binding it
   * is an RPC stub: pass the headers as a plain object, `Object.fromEntries(response.headers)`.
   */
  settle?: (outcome: number | boolean, headers?: ResponseHeaders) => Promise<void>;
  /**
   * present when a rule of units (every algorithm but concurrency) granted them (and, doing
   * nothing, on a dry-run rule's would-be denial): call it once the request's real cost is known (the tokens an LLM call used, say) with the difference. Positive
   * units are taken now and never denied, so the key may owe: later requests are denied until they
   * have aged out or refilled. Negative units give back some of what `limit` took, under a
   * windowed rule only (a token bucket or gcra rejects them: take the least a request can cost up
   * front, and charge the rest). One charge counts at most 2^53 − 1 unit·ms over the period; a
   * bucket owes a year's refill at most. A failure of the object is counted and logged, never
   * thrown; units that are not a whole number reject with a TypeError. Over the service binding
   * it is an RPC stub.
   */
  charge?: (units: number) => Promise<void>;
}

/**
 * The one translation from the internal Decision, with the release of the slots it took, if any,
 * and the ways to settle or charge it.
 * A dry-run rule never denies: its would-be denial is a success with reason "dry-run", so code
 * that reads only `success` (as Cloudflare's binding is read) lets the request through.
 */
export function limitResult(rule: Rule, decision: Decision, { release, settle, charge }: Pick<LimitResult, "release" | "settle" | "charge"> = {}): LimitResult {
  const wouldDeny = !decision.allowed && rule.dryRun;
  const result: LimitResult = {
    success: decision.allowed || rule.dryRun,
    limit: decision.limit,
    remaining: decision.remaining,
    reset: decision.resetAt,
    retryAfter: decision.allowed || wouldDeny ? 0 : decision.retryAfter,
    rule: rule.name,
  };
  if (rule.unlimited) result.reason = "unlimited";
  else if (wouldDeny) result.reason = "dry-run";
  else if (decision.reason !== undefined) result.reason = decision.reason;
  if (release) result.release = release;
  if (settle) result.settle = settle;
  if (charge) result.charge = charge;
  return result;
}
