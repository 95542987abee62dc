/** A key as text: the markers and escapes it is written with, and a key an operator typed (the admin API's, an override's) as floodgate builds it. */
import { TOKEN } from "../config/fields";
import type { KeyPart, Rule } from "../config/types";
import { ipKey } from "./ip";
import { hostKey } from "./match";
import { pathAsMatched } from "./path";

/**
 * What a key part becomes when the request lacks it. Real values always have `#` escaped, so
 * this marker never equals one.
 */
export const MISSING_PART = "#none";

/**
 * The key a request is counted under when its own is new to this isolate and the rule's
 * `newKeysPerSecond` is spent: one bucket for all of them, as `#none` is for a missing part. Real
 * keys have `#` escaped, so it never equals one.
 */
export const OVERFLOW_KEY = "#overflow";

/**
 * A value as one part of a key: {@link MISSING_PART} when there is none (absent or empty), else the
 * value with `%`, `|` and `#` escaped, so that no value reads as two parts or as a marker.
 */
export function keyPart(value: string | null): string {
  return value === null || value === "" ? MISSING_PART : escapeValue(value);
}

const ESCAPED = /[%|#]/;

/** A value of one part of a key as it was before {@link keyPart} escaped it: `%25`, `%7C` and `%23` read back as `%`, `|` and `#`. */
export function unescapedPart(part: string): string {
  return part.replace(/%(25|7C|23)/g, (escape) => decodeURIComponent(escape));
}

function escapeValue(value: string): string {
  // Most values (addresses, API keys) have nothing to escape: testing is cheaper than replacing.
  if (!ESCAPED.test(value)) return value;
  return value.replace(/[%|#]/g, (c) => (c === "%" ? "%25" : c === "|" ? "%7C" : "%23"));
}

/** Trims HTTP optional whitespace (space and tab) only; a loop, as a trimming regex can go quadratic. */
export function trimOws(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s[start] === " " || s[start] === "\t")) start++;
  while (end > start && (s[end - 1] === " " || s[end - 1] === "\t")) end--;
  return s.slice(start, end);
}

/** A country code as Cloudflare writes it (ISO 3166-1 alpha-2, "T1" for Tor, "XX" unknown), in any case. */
export const COUNTRY = /^[A-Za-z0-9]{2}$/;

/** How `durableObjectName` (./key) names a key past 1 KB. */
const HASHED = /^#sha256:[0-9a-f]{64}$/;

/** Whether `key` is the name `durableObjectName` (./key) gives a key past 1 KB, `#sha256:<hex>`, rather than a key a request has. */
export function isHashedName(key: string): boolean {
  return HASHED.test(key);
}

/** A key typed for a rule that floodgate could never build for it: reading or resetting it would find an object no request uses. */
export class UnbuildableKeyError extends Error {
  override readonly name = "UnbuildableKeyError";
}

/**
 * A key an operator typed, as floodgate builds it: each `ip` part given as an address is grouped
 * as the rule groups clients (`2001:db8:abcd:12ff::1` → `2001:db8:abcd:1200::/56`,
 * `::ffff:10.0.0.1` → `10.0.0.1`), each `host` part as a URL has it, lower-cased, without port or
 * trailing dot, a `method` upper-cased, a `path` part written as `match.path` sees paths and a
 * URL escapes them (so `/café` and `/a b` may be typed). Throws an {@link UnbuildableKeyError}
 * saying how to write it for a key no request could have: parts that do not line up with the
 * rule's, a value with a raw `#` or a `%` that is not one of the escapes, an `ip` part that is no
 * address, a header value with spaces around it (the runtime strips them) or a NUL, CR or LF in
 * it, an AS number past 32 bits, a path not starting with `/` or holding a `?`, a tab or a line
 * break, a host or method no request could name, a `global` part other than `global`, `#none` for
 * a part every request has (`path`, `method`, `host`, `global`). `#overflow` is a key of a rule
 * with `newKeysPerSecond`, and `#sha256:<hex>` the name `durableObjectName` (./key) gives a key
 * past 1 KB.
 */
export function canonicalKey(rule: Pick<Rule, "key" | "ipv6Prefix" | "newKeysPerSecond">, key: string): string {
  if ((key === OVERFLOW_KEY && rule.newKeysPerSecond !== null) || isHashedName(key)) return key;
  // A marker mistyped or out of place is told as such: "escape the #" would be no help.
  if (key === OVERFLOW_KEY) throw new UnbuildableKeyError(`${OVERFLOW_KEY} is the key new keys share past newKeysPerSecond, which this rule does not set`);
  if (key.startsWith("#sha256:")) throw new UnbuildableKeyError(`a #sha256 name is "#sha256:" then 64 lower-case hex digits, the SHA-256 of a key past 1 KB`);
  const values = key.split("|");
  if (values.length !== rule.key.length) {
    const parts = rule.key.map(describePart).join(", ");
    throw new UnbuildableKeyError(`the rule's key has ${rule.key.length} part${rule.key.length === 1 ? "" : "s"} (${parts}) joined by "|", this one ${values.length}; a "|" inside a value is written %7C`);
  }
  return values.map((value, i) => canonicalPart(rule.key[i]!, value, rule.ipv6Prefix)).join("|");
}

/** Parts every request has: one of them is never {@link MISSING_PART}. */
const ALWAYS_PRESENT: ReadonlySet<KeyPart["source"]> = new Set(["path", "method", "host", "global"]);

function canonicalPart(part: KeyPart, value: string, ipv6Prefix: number): string {
  const named = describePart(part);
  if (value === MISSING_PART) {
    if (ALWAYS_PRESENT.has(part.source)) throw new UnbuildableKeyError(`${named}: every request has one, so it is never ${MISSING_PART}`);
    return value;
  }
  if (value === "") throw new UnbuildableKeyError(`${named} is empty: a part the request lacks, or gives empty, is ${MISSING_PART}`);
  if (/#|%(?!25|7C|23)/.test(value)) {
    const path = part.source === "path" ? ` (a path may be typed as is, /café, or with its own escapes' "%" written %25, /a%252Fb for /a%2Fb)` : "";
    throw new UnbuildableKeyError(`${named}: a value's "%", "|" and "#" are written %25, %7C and %23${path}`);
  }
  switch (part.source) {
    case "ip": {
      const slash = value.lastIndexOf("/");
      const grouped = slash > 0 && value.slice(slash + 1) === String(ipv6Prefix) ? ipKey(value.slice(0, slash), ipv6Prefix) : ipKey(value, ipv6Prefix);
      if (grouped === null || (slash > 0 && !grouped.includes("/"))) throw new UnbuildableKeyError(`${named}: expected an address like 203.0.113.7 or 2001:db8::1, or ${MISSING_PART}`);
      return grouped;
    }
    case "header":
      if (trimOws(value) !== value) throw new UnbuildableKeyError(`${named}: header values arrive without the spaces and tabs around them`);
      if (/[\0\r\n]/.test(value)) throw new UnbuildableKeyError(`${named}: a header value holds no NUL, CR or LF`);
      return value;
    case "path": {
      const path = unescapedPart(value);
      if (!path.startsWith("/") || /[?\uD800-\uDFFF]/u.test(path)) throw new UnbuildableKeyError(`${named}: expected a path starting with "/", without its query, like /api/items`);
      // The URL parser drops tabs and line breaks from a URL, and escapes spaces and other controls in a path: "/a b" arrives as "/a%20b".
      if (/[\t\n\r]/.test(path)) throw new UnbuildableKeyError(`${named}: no request path holds a tab or a line break`);
      return keyPart(pathAsMatched(path.replace(/[\x00-\x20\x7f]/g, (c) => encodeURIComponent(c))));
    }
    case "host":
      return hostKey(urlHost(value, named));
    case "method":
      if (!TOKEN.test(value)) throw new UnbuildableKeyError(`${named}: expected an HTTP method like GET`);
      return value.toUpperCase();
    case "global":
      if (value !== "global") throw new UnbuildableKeyError(`${named}: is always "global"`);
      return value;
    case "asn":
      if (!/^[0-9]{1,10}$/.test(value) || Number(value) > MAX_ASN) throw new UnbuildableKeyError(`${named}: expected an AS number like 13335 (at most ${MAX_ASN})`);
      return String(Number(value));
    case "country":
      if (!COUNTRY.test(value)) throw new UnbuildableKeyError(`${named}: expected a two-letter country code like NL (T1 for Tor, XX unknown)`);
      return value.toUpperCase();
    default:
      return value;
  }
}

/** AS numbers are 32 bits (RFC 6793). */
const MAX_ASN = 4_294_967_295;

/**
 * A typed host as a request's URL has it (`[2001:0DB8::1]` is `[2001:db8::1]`, `127.1` is
 * `127.0.0.1`, `bücher.example` is `xn--bcher-kva.example`), so that it names the key requests to
 * that host have. Spaces and control characters, which the URL parser would drop, are refused.
 */
function urlHost(value: string, named: string): string {
  const wrong = () => new UnbuildableKeyError(`${named}: expected a host name like api.example.com`);
  if (/[\x00-\x20\x7f/?@\\]/.test(value)) throw wrong();
  try {
    return new URL(`http://${value}/`).host;
  } catch {
    throw wrong();
  }
}

function describePart(part: KeyPart): string {
  return "name" in part ? `${part.source}:${part.name}` : part.source;
}
