/** The rate-limit response headers: which rule to report, and its RateLimit* fields in the configured form, X-RateLimit-* and Retry-After. */
import { largestCost } from "../algorithms";
import type { Decision } from "../algorithms/types";
import type { Rule } from "../config/types";

/** One applicable rule and the decision it gave for this request. */
export interface RuleDecision {
  rule: Rule;
  decision: Decision;
}

/**
 * The entry to report on an allowed response: the one with the fewest units remaining, the
 * latest `moreAt` among ties (the `t` it shows: the client will wait longest for more). Undefined
 * when no rule applied.
 *
 * @example
 * mostRestrictive([{ rule: perIp, decision: d1 }, { rule: perKey, decision: d2 }]); // the smaller `remaining`
 */
export function mostRestrictive<E extends RuleDecision>(entries: readonly E[]): E | undefined {
  return pick(entries, (a, b) => a.decision.remaining < b.decision.remaining
    || (a.decision.remaining === b.decision.remaining && moreComesAt(a) > moreComesAt(b)));
}

/**
 * When the entry's next unit comes, as a tie-break sees it. A concurrency slot comes back when
 * some response ends, at the latest this one's: its `moreAt`, the earliest slot expiry, only
 * bounds that, and compared as a time it would hide a rate rule's real wait behind an `r=0` with no `t`.
 */
function moreComesAt(entry: RuleDecision): number {
  return entry.rule.algorithm === "concurrency" ? -Infinity : entry.decision.moreAt;
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

/** Which `RateLimit*` fields a response carries: a version of draft-ietf-httpapi-ratelimit-headers, or none. */
export type HeaderForm = "draft-10" | "draft-7" | "draft-6" | "none";

/** Every {@link HeaderForm}, the default first: what `RATE_LIMIT_HEADERS` accepts. */
export const HEADER_FORMS: readonly HeaderForm[] = ["draft-10", "draft-7", "draft-6", "none"];

/** The header forms to send: `form` for the `RateLimit*` fields, `legacy` for `X-RateLimit-*`. */
export interface HeaderOptions {
  form: HeaderForm;
  legacy: boolean;
}

/** What a response carries unless configured otherwise: draft-10's fields and the `X-RateLimit-*` ones. */
export const DEFAULT_HEADERS: Readonly<HeaderOptions> = Object.freeze({ form: "draft-10", legacy: true });

/**
 * The headers describing one rule's decision in the chosen forms, as the README's HTTP behaviour specifies.
 * draft-10 (draft-ietf-httpapi-ratelimit-headers-10): `RateLimit-Policy` and `RateLimit` are
 * Structured Field Lists with one item each, the policy name as an sf-string with integer
 * parameters; draft-7: `RateLimit` a Dictionary of limit, remaining and reset, `RateLimit-Policy`
 * `<limit>;w=<window>`; draft-6: separate `RateLimit-Limit`, `-Remaining`, `-Reset` and the same
 * policy. `t` (and reset) is the seconds until *more* quota is available: on a denial it equals
 * `Retry-After`; on an allowed response it counts to `moreAt` and is left out (reset 0) at the full
 * quota. Seconds are rounded up so a client that waits them is never early. `Retry-After` on every
 * denial, whatever the options. A concurrency rule's policy has no window and says its quota unit,
 * `qu="concurrent-requests"`, and an allowed response has no `t`: a slot comes back when some
 * response ends, which its `moreAt` (the earliest slot expiry) only bounds.
 *
 * @example
 * rateLimitHeaders(rule, decision, Date.now(), DEFAULT_HEADERS);
 * // denied: {
 * //   "RateLimit-Policy": '"api-per-key";q=1000;w=60',
 * //   "RateLimit": '"api-per-key";r=0;t=12',
 * //   "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12",
 * //   "Retry-After": "12",
 * // }
 * rateLimitHeaders(rule, decision, Date.now(), { form: "draft-7", legacy: false });
 * // { "RateLimit": "limit=1000, remaining=0, reset=12", "RateLimit-Policy": "1000;w=60", "Retry-After": "12" }
 */
export function rateLimitHeaders(rule: Rule, decision: Decision, now: number, options: HeaderOptions): Record<string, string> {
  const parts = fixedParts(rule);
  const remaining = sfInteger(decision.remaining);
  const retryAfter = decision.allowed ? undefined : Math.max(1, Math.ceil(decision.retryAfter / 1000));
  // Undefined on an allowed response at the full quota: no more is to come. Short of it, at least 1:
  // a unit that came back between the decision and now is more that came within the second.
  const full = !parts.windowed || decision.remaining >= largestCost(rule);
  const t = retryAfter !== undefined ? sfInteger(retryAfter) : full ? undefined : sfInteger(Math.max(1, Math.ceil((decision.moreAt - now) / 1000)));
  const headers: Record<string, string> = {};
  switch (options.form) {
    case "draft-10":
      headers["RateLimit-Policy"] = parts.policy;
      headers["RateLimit"] = t === undefined ? `${parts.name};r=${remaining}` : `${parts.name};r=${remaining};t=${t}`;
      break;
    case "draft-7":
      headers["RateLimit"] = `limit=${parts.limit}, remaining=${remaining}, reset=${t ?? 0}`;
      headers["RateLimit-Policy"] = parts.bare;
      break;
    case "draft-6":
      headers["RateLimit-Limit"] = parts.limit;
      headers["RateLimit-Remaining"] = String(remaining);
      headers["RateLimit-Reset"] = String(t ?? 0);
      headers["RateLimit-Policy"] = parts.bare;
      break;
    case "none":
      break;
  }
  if (options.legacy) {
    headers["X-RateLimit-Limit"] = parts.limit;
    headers["X-RateLimit-Remaining"] = String(remaining);
    headers["X-RateLimit-Reset"] = String(t ?? 0);
  }
  if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
  return headers;
}

/**
 * The fields of each family floodgate sends, lower-cased: one family owned is owned whole. The
 * drafts' family is its five names; the legacy one is every `X-RateLimit-*` field, whose origins
 * send more than floodgate's three (GitHub's `X-RateLimit-Used` and `X-RateLimit-Resource`).
 */
const FAMILIES: readonly { prefix: string; owns: (name: string) => boolean }[] = [
  { prefix: "ratelimit", owns: (name) => DRAFT_NAMES.has(name) },
  { prefix: "x-ratelimit", owns: (name) => name.startsWith("x-ratelimit-") },
];

const DRAFT_NAMES: ReadonlySet<string> = new Set(["ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]);

/**
 * `response` with `headers` (from {@link rateLimitHeaders}) added. Each family of fields they hold
 * (`RateLimit*`, `X-RateLimit-*`) replaces whatever of that family the response carried, so a
 * client never reads two sets of figures; a family floodgate does not send (`RATE_LIMIT_HEADERS`
 * `none`, `LEGACY_HEADERS` `false`) is left to the origin. A 429 or 503 that says itself when to
 * come back (`Retry-After`: an origin's own limit or outage) is left as it is: floodgate's figures
 * of an admitted request would contradict it (a `Retry-After` on another status, a 202's polling
 * interval or a redirect's, says nothing of a quota). The response itself when its headers can be
 * changed, a copy when they are immutable (straight from `fetch`).
 */
export function withRateLimitHeaders(response: Response, headers: Record<string, string>): Response {
  const names = Object.keys(headers);
  if (names.length === 0 || ((response.status === 429 || response.status === 503) && response.headers.has("retry-after"))) return response;
  const owned = FAMILIES.filter((f) => names.some((n) => n.toLowerCase().startsWith(f.prefix)));
  const apply = (to: Response) => {
    // Names first, then deletions: a Headers is not changed while it is walked.
    const theirs = owned.length === 0 ? [] : [...to.headers.keys()].filter((name) => owned.some((f) => f.owns(name)));
    for (const name of theirs) to.headers.delete(name);
    for (const name of names) to.headers.set(name, headers[name]!);
    return to;
  };
  try {
    return apply(response);
  } catch {
    return apply(new Response(response.body, response));
  }
}

/** What a rule's headers say whatever the decision, rendered once per rule rather than per response. */
interface FixedParts {
  /** the rule's name as an sf-string */
  name: string;
  /** draft-10's `RateLimit-Policy` */
  policy: string;
  /** draft-6 and -7's `RateLimit-Policy`: `<limit>;w=<window>` */
  bare: string;
  limit: string;
  /** whether `moreAt` says when more quota comes: not for concurrency, whose slots come back when responses end */
  windowed: boolean;
}

const fixed = new WeakMap<Rule, FixedParts>();

function fixedParts(rule: Rule): FixedParts {
  let parts = fixed.get(rule);
  if (!parts) {
    const name = sfString(rule.name);
    const limit = sfInteger(rule.limit);
    const windowed = rule.algorithm !== "concurrency";
    // A concurrency rule's period is its slot TTL, no window: its quota unit says what q counts instead.
    const window = windowed ? `;w=${Math.max(1, sfInteger(Math.ceil(rule.periodMs / 1000)))}` : "";
    const policy = windowed ? `${name};q=${limit}${window}` : `${name};q=${limit};qu="concurrent-requests"`;
    fixed.set(rule, (parts = { name, policy, bare: `${limit}${window}`, limit: String(limit), windowed }));
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
