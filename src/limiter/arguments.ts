/** The arguments code passes to limit, peek and reset, checked at the door with messages that say what to pass. */
import { parseDuration } from "../config/duration";
import type { Rule } from "../config/types";
import { CONTINENT_CODE, LOCATION_CODE, type Whereabouts } from "../fast/relay";

/**
 * A key as given: a non-empty string. An empty or missing key is an error, never an unlimited
 * grant, and never silently a shared bucket. It is used as given: `durableObjectName` names a key
 * past 1 KB of UTF-8 by its hash, as it does the proxy's, so the two share one counter whatever
 * the key's length (and hashes a key written as such a hash, which names no long key's counter here).
 */
export function checkKey(key: unknown, where: string): string {
  if (typeof key !== "string" || key === "") {
    throw new TypeError(`${where}: key must be a non-empty string (a user id, an API key, an address), got ${describe(key)}`);
  }
  return key;
}

/**
 * An options object as given: an object whose names are all in `known`; anything else is a
 * TypeError listing the options, so a misspelled `cots` never silently costs the default. The list
 * marks every option but those in `shownRequired` optional; their values are the caller's to check,
 * with messages that say what each must be.
 */
export function checkOptions(options: unknown, known: readonly string[], where: string, shownRequired: readonly string[] = []): asserts options is object {
  const list = known.map((name) => (shownRequired.includes(name) ? name : `${name}?`)).join(", ");
  if (typeof options !== "object" || options === null) throw new TypeError(`${where}: expected options { ${list} }, got ${describe(options)}`);
  const unknown = Object.keys(options).filter((name) => !known.includes(name));
  if (unknown.length > 0) throw new TypeError(`${where}: unknown option ${unknown.map((name) => JSON.stringify(name)).join(", ")}; the options are ${list}`);
}

/** A cost as given: a positive safe integer; `undefined` takes the rule's own constant cost (1 unless it sets one). */
export function checkCost(cost: unknown, rule: Pick<Rule, "cost">, where: string): number {
  if (cost === undefined) return "units" in rule.cost ? rule.cost.units : 1;
  if (!Number.isSafeInteger(cost) || (cost as number) < 1) {
    const tooLarge = typeof cost === "number" && Number.isInteger(cost) && cost > Number.MAX_SAFE_INTEGER;
    throw new TypeError(`${where}: cost must be a positive integer${tooLarge ? " of at most 2^53 - 1 (Number.MAX_SAFE_INTEGER)" : ""}, got ${describe(cost)}`);
  }
  return cost as number;
}

/**
 * Where a call comes from as given: `location` (`request.cf.colo`, a code like "AMS") for a rule
 * with `aggregate: "location"` to sync through that location's relay, `continent`
 * (`request.cf.continent`, like "EU") for one with `aggregate: "continent"`, or `"auto"` (a fast
 * rule's default) once many isolates share its key; either left out: such a rule syncs straight to
 * the key's object. Each names a relay object, so only codes of their shape are taken (see LOCATION_CODE).
 */
export function checkWhereabouts(options: { location?: unknown; continent?: unknown }, where: string): Whereabouts {
  const { location, continent } = options;
  return {
    ...(location !== undefined ? { location: checkPlace(location, where, "location", '"AMS" (request.cf.colo), 1 to 8 letters or digits', LOCATION_CODE) } : {}),
    ...(continent !== undefined ? { continent: checkPlace(continent, where, "continent", '"EU" (request.cf.continent), 2 letters or digits', CONTINENT_CODE) } : {}),
  };
}

/** Arguments past those a call takes (the library's `limit(key, { cost })` shape given to the binding, say) are an error, not a cost silently dropped; a trailing undefined drops nothing. */
export function checkNoMore(given: ArrayLike<unknown>, takes: number, where: string, what: string): void {
  if (Array.from(given).slice(takes).some((argument) => argument !== undefined)) throw new TypeError(`${where}: takes ${what}, got ${given.length} arguments`);
}

/**
 * The per-call context as given: `ctx` an ExecutionContext (anything with `waitUntil`), `signal` an
 * AbortSignal. Either wrong (Hono's `c` passed for `c.executionCtx`, say) is a TypeError now, not a
 * failure every fast sync and strict batch would meet later, decided by onError as an outage.
 * `ctxRequired`: a call that takes no answer without one (a gate, any of whose rules may be fast).
 */
export function checkCallContext(options: { ctx?: unknown; signal?: unknown }, where: string, ctxRequired = false): void {
  const { ctx, signal } = options;
  if ((ctx !== undefined || ctxRequired) && typeof (ctx as { waitUntil?: unknown } | null)?.waitUntil !== "function") {
    throw new TypeError(`${where}: ctx must be the request's ExecutionContext (in Hono, c.executionCtx), with a waitUntil method; got ${describe(ctx)}`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`${where}: signal must be an AbortSignal (request.signal), got ${describe(signal)}`);
}

/**
 * How long a call may wait, as given: milliseconds (a whole number, 0 or more, as `retryAfter`
 * is), or a duration like "5s"; a TypeError saying so for anything else.
 */
export function checkTimeout(value: unknown, where: string): number {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  const parsed = typeof value === "string" ? parseDuration(value) : undefined;
  if (parsed?.ok) return parsed.ms;
  throw new TypeError(`${where}: timeout must be milliseconds (a whole number, 0 or more) or a duration like "5s", got ${describe(value)}`);
}

/** A true-or-false option as given, `unset` when absent; a TypeError naming the option for anything else. */
export function checkFlag(value: unknown, option: string, where: string, unset = false): boolean {
  if (value === undefined) return unset;
  if (typeof value !== "boolean") throw new TypeError(`${where}: ${option} must be true or false, got ${describe(value)}`);
  return value;
}

/** A request as given to `check`: a Request, or a TypeError naming what came instead. */
export function checkRequest(request: unknown, where: string): asserts request is Request {
  if (!(request instanceof Request)) throw new TypeError(`${where}: expected a Request, got ${request === null ? "null" : typeof request}`);
}

function checkPlace(place: unknown, where: string, option: string, like: string, shape: RegExp): string {
  if (typeof place !== "string" || !shape.test(place)) throw new TypeError(`${where}: ${option} must be a Cloudflare ${option} code like ${like}, got ${describe(place)}`);
  return place;
}

/** A value as a message names it: short, and unambiguous about its type (`NaN`, `"3"`, `an object`). */
export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 37)}...` : value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  const kind = Array.isArray(value) ? "array" : typeof value;
  return `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind}`;
}
