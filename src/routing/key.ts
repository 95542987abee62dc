/** A rule's key for a request, the Durable Object name it maps to, and the units the request costs. */
import type { Cost, KeyPart, Rule } from "../config/types";
import { ipKey } from "./ip";
import { COUNTRY, isHashedName, keyPart, MISSING_PART, trimOws } from "./key-text";
import { hostKey } from "./match";
import { normalizePath } from "./path";

/** Keys longer than this (UTF-8 bytes) are hashed before they name a Durable Object. */
export const MAX_KEY_BYTES = 1024;

/**
 * Builds a rule's key: each part's value, escaped, joined with `|`.
 *
 * Values are taken as-is except that `%`, `|` and `#` become `%25`, `%7C` and `%23`, so the key
 * splits back into exactly its parts and stays readable.
 *
 * `ip` is `CF-Connecting-IP` and nothing else: X-Forwarded-For and friends are set by clients.
 * Its value is {@link ipKey}'s: an IPv4 address as is, an IPv4-mapped IPv6 address as its IPv4,
 * any other IPv6 address as its network under the rule's `ipv6Prefix` (`2001:db8:abcd:1200::/56`),
 * so a client cannot mint quotas from the addresses its ISP delegates to it. A CF-Connecting-IP
 * that is not an address counts as missing.
 *
 * `asn` and `country` are what Cloudflare says of the client (`request.cf.asn`, `request.cf.country`),
 * which no client sets: one counter per network or country, as Cloudflare's own rate limiting
 * rules can count.
 *
 * A part the request lacks (no such header, query parameter or cookie; no CF-Connecting-IP; no `request.cf`), or
 * gives empty, becomes {@link MISSING_PART}; so does a query parameter given more than once, which
 * origins read differently (the first, the last), so that no value floodgate picked could be the
 * one the origin does not. All such requests share ONE bucket under the rule: they are limited
 * together, never let through unlimited, and omitting or emptying a part, or repeating a query
 * parameter, cannot buy a fresh quota. A cookie's value is percent-decoded, as origins' cookie
 * parsers do, so `a%62c` and `abc` are one client.
 *
 * @example
 * // key: [header:x-api-key, method] on `GET /` with `x-api-key: k|1`
 * buildKey(rule, request); // "k%7C1|GET"
 * // the same request without x-api-key
 * buildKey(rule, request); // "#none|GET"
 * // key: [ip] (ipv6Prefix 56) with `CF-Connecting-IP: 2001:db8:abcd:12ff::1`
 * buildKey(rule, request); // "2001:db8:abcd:1200::/56"
 */
export function buildKey(rule: Pick<Rule, "key" | "ipv6Prefix">, request: Request): string {
  let url: URL | undefined;
  const requestUrl = () => (url ??= new URL(request.url));
  const parts = rule.key;
  let key = "";
  for (let i = 0; i < parts.length; i++) {
    const value = partValue(parts[i]!, request, requestUrl, rule.ipv6Prefix);
    key += (i === 0 ? "" : "|") + keyPart(value);
  }
  return key;
}

/**
 * The client's address, `CF-Connecting-IP` and nothing else, or null without one: what the `ip` key
 * part, `match.ips`, ALLOW_IPS and DENY_IPS read. Trimmed as a header part is: the runtime keeps
 * a value's trailing spaces and tabs, with which an address was no address (the `ip` part's
 * `#none`) and was in no list, DENY_IPS included.
 */
export function clientAddress(request: Request): string | null {
  const value = request.headers.get("CF-Connecting-IP");
  return value === null ? null : trimOws(value);
}

function partValue(part: KeyPart, request: Request, url: () => URL, ipv6Prefix: number): string | null {
  switch (part.source) {
    case "ip": {
      const address = clientAddress(request);
      return address === null ? null : ipKey(address, ipv6Prefix);
    }
    case "header": {
      // The Fetch standard strips a value's surrounding whitespace, and origins read it so; the
      // runtime keeps trailing spaces and tabs, which would otherwise name a fresh key per suffix.
      const value = request.headers.get(part.name);
      return value === null ? null : trimOws(value);
    }
    case "query":
      return onlyValue(queryValues(url().searchParams, part.name));
    case "cookie":
      return cookieValue(request.headers.get("Cookie"), part.name);
    case "path":
      return normalizePath(url().pathname);
    case "method":
      return request.method.toUpperCase();
    case "host":
      return hostKey(url().host);
    case "global":
      return "global";
    case "asn":
      return asnOf(request);
    case "country":
      return countryOf(request);
  }
}

/** The client's autonomous system as Cloudflare says (`request.cf.asn`), in decimal; null without one. */
function asnOf(request: Request): string | null {
  const asn = (request.cf as { asn?: unknown } | undefined)?.asn;
  return Number.isSafeInteger(asn) && (asn as number) >= 0 ? String(asn) : null;
}

/** The client's country as Cloudflare says (`request.cf.country`: ISO 3166-1 alpha-2, "T1" for Tor, "XX" unknown), upper-cased; null without one. */
function countryOf(request: Request): string | null {
  const country = (request.cf as { country?: unknown } | undefined)?.country;
  return typeof country === "string" && COUNTRY.test(country) ? country.toUpperCase() : null;
}

const keyedByRules = new WeakMap<readonly Rule[], readonly string[]>();

/**
 * The names of the headers the rules read key parts from (`header:<name>`), found once per rule set.
 *
 * @example
 * keyedHeaders(settings.rules); // ["x-api-key"]
 */
export function keyedHeaders(rules: readonly Rule[]): readonly string[] {
  let names = keyedByRules.get(rules);
  if (!names) {
    const parts = rules.flatMap((rule) => rule.key);
    names = [...new Set(parts.flatMap((part) => (part.source === "header" ? [part.name] : [])))];
    keyedByRules.set(rules, names);
  }
  return names;
}

/**
 * The value of the first cookie called `name` (names are case-sensitive), or null. A browser sends
 * two of one name when they were set for different paths or domains, most specific first, and
 * cookie parsers take the first. Pairs are split on `;` and trimmed; pairs without `=` are skipped;
 * a value in double quotes loses them and is percent-decoded, as the origin's cookie parser would,
 * so `"abc"`, `a%62c` and `abc` are the same client.
 */
function cookieValue(header: string | null, name: string): string | null {
  if (header === null) return null;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq === -1 || trimOws(pair.slice(0, eq)) !== name) continue;
    const value = trimOws(pair.slice(eq + 1));
    return percentDecoded(value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value);
  }
  return null;
}

/**
 * The values of the query parameter `name`, named in any case: ASP.NET reads `?K=` as `?k=`, so
 * `?K=victim&k=random` is `k` given twice there, not a fresh key `random`.
 */
function queryValues(params: URLSearchParams, name: string): string[] {
  const lower = name.toLowerCase();
  const values: string[] = [];
  for (const [given, value] of params) if (given === name || given.toLowerCase() === lower) values.push(value);
  return values;
}

/** The one value of a query parameter, or null when there is none or more than one (ambiguous: see {@link buildKey}). */
function onlyValue(values: readonly string[]): string | null {
  return values.length === 1 ? values[0]! : null;
}

/** `value` with its %XX escapes decoded, as the `cookie` package and PHP do; as it is when they are malformed. */
function percentDecoded(value: string): string {
  if (!value.includes("%")) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * The name that addresses the Durable Object owning (rule, key): `<rule>/<key>`, or, when the key
 * is longer than {@link MAX_KEY_BYTES} in UTF-8, `<rule>/#sha256:<hex>`. Rule names cannot
 * contain `/`, so two rules never share an object. A key the proxy builds never starts with `#`
 * but for its markers (a value's `#` is written `%23`); one code passes may look like a hashed
 * name itself, and is hashed too, so that it never reaches a long key's object.
 *
 * @example
 * await durableObjectName("login", "203.0.113.9"); // "login/203.0.113.9"
 * await durableObjectName("api", "x".repeat(2000)); // "api/#sha256:5d1e…"
 */
export async function durableObjectName(ruleName: string, key: string): Promise<string> {
  const hashed = isHashedName(key);
  // A UTF-16 code unit is at most 3 bytes of UTF-8: most keys are short enough without encoding them.
  if (!hashed && key.length * 3 <= MAX_KEY_BYTES) return `${ruleName}/${key}`;
  const bytes = new TextEncoder().encode(key);
  return !hashed && bytes.length <= MAX_KEY_BYTES ? `${ruleName}/${key}` : `${ruleName}/#sha256:${await sha256Hex(bytes)}`;
}

/** The object an operator names (the admin API): {@link durableObjectName}'s, or the object a `#sha256` name names, the long key's it was made from. */
export function namedObject(ruleName: string, typed: string): Promise<string> {
  return isHashedName(typed) ? Promise.resolve(`${ruleName}/${typed}`) : durableObjectName(ruleName, typed);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

const MAX_QUOTED_VALUE = 32;

/**
 * The units a request consumes under a rule's `cost`.
 *
 * `header:<name>` reads a positive decimal integer (ASCII digits, optional surrounding spaces or
 * tabs, at most Number.MAX_SAFE_INTEGER). A request without that header costs 1, like a rule
 * without `cost`: leaving the header out must not make a request free. Any other value is an
 * error for a 400, quoting at most 32 characters of what was sent.
 *
 * @example
 * requestCost({ units: 5 }, request);         // { units: 5 }
 * requestCost({ header: "x-cost" }, request);  // `x-cost: 3` → { units: 3 }; absent → { units: 1 }
 * // `x-cost: abc` → { error: 'header x-cost: expected a positive integer, got "abc"' }
 */
export function requestCost(cost: Cost, request: Request): { units: number } | { error: string } {
  if ("units" in cost) return { units: cost.units };
  const raw = request.headers.get(cost.header);
  if (raw === null) return { units: 1 };
  return headerUnits(cost.header, raw, "request");
}

/**
 * Units a header says: a decimal integer (ASCII digits, optional surrounding spaces or tabs, at
 * most Number.MAX_SAFE_INTEGER), or an error. A request's `cost` header is at least 1, and its
 * error, the 400's detail, quotes at most 32 characters of the value to the client who sent it. A
 * response's `responseCost` header is 0 or more and saturates past the largest, as the request can
 * no longer be refused; its error is logged, so it tells what kind of value it was, never the value.
 */
export function headerUnits(name: string, raw: string, from: "request" | "response"): { units: number } | { error: string } {
  const least = from === "request" ? 1 : 0;
  // Anchored at the start, and the digit class is disjoint from the space classes: no backtracking.
  const digits = /^[ \t]*([0-9]+)[ \t]*$/.exec(raw)?.[1];
  const units = digits === undefined ? -1 : Number(digits);
  if (from === "response" && units > Number.MAX_SAFE_INTEGER) return { units: Number.MAX_SAFE_INTEGER };
  if (units >= least && units <= Number.MAX_SAFE_INTEGER) return { units };
  const expected = from === "request" ? "a positive integer" : "a whole number, 0 or more";
  return { error: `header ${name}: expected ${expected}, got ${from === "request" ? quoted(raw) : kindOf(raw)}` };
}

/** At most 32 characters of a value, quoted. */
function quoted(raw: string): string {
  return JSON.stringify(raw.length > MAX_QUOTED_VALUE ? `${raw.slice(0, MAX_QUOTED_VALUE - 1)}…` : raw);
}

/** What kind of value a header's unusable value was, without a character of it. */
function kindOf(raw: string): string {
  if (trimOws(raw) === "") return "an empty value";
  if (/^[ \t]*-[0-9]+[ \t]*$/.test(raw)) return "a negative number";
  return `${raw.length} character${raw.length === 1 ? " that is" : "s that are"} not one`;
}
