/** A rule's `overrides`: named keys with limits of their own (a partner's API key, an office's address) or none, validated once and looked up per request. */
import { canonicalKey, isHashedName, MISSING_PART, OVERFLOW_KEY, UnbuildableKeyError, unescapedPart } from "../routing/key-text";
import { matchFits } from "../routing/match";
import { ConfigError, show, type RuleRef } from "./errors";
import { fail, fieldsOf, isObject, slipOf, type Fields } from "./fields";
import type { KeyOverride, KeyQuota, Rule } from "./types";

/** What sets an override's quota: the rule's quota fields, never how it is matched, keyed, counted or enforced. */
const QUOTA_FIELDS = ["limit", "period", "burst", "delay"] as const;
const OVERRIDE_FIELDS = ["keys", ...QUOTA_FIELDS, "unlimited"];

/**
 * Parses a rule's `overrides`: an array of `{ keys, limit?, period?, burst?, delay? }` or
 * `{ keys, unlimited: true }`, each key written as the admin API takes it and canonicalized as the
 * rule builds keys, so an override matches the requests it names (`::ffff:203.0.113.7` is
 * `203.0.113.7`). An override's quota is checked as the rule written with it would be, by
 * `reparse` (the rule's own parser, given the rule's fields with the override's in their place),
 * so every bound a rule has holds for each key (a cost the override's limit cannot admit, a delay
 * past its burst); its errors name the override. A key named by two overrides is an error.
 * Undefined when the rule gives none.
 */
export function parseOverrides(value: unknown, ruleFields: Fields, rule: Rule, at: RuleRef, reparse: (fields: Record<string, unknown>) => Rule): ReadonlyMap<string, KeyOverride> | undefined {
  if (value === undefined) return undefined;
  const example = `[{"keys": ["k-partner"], "limit": 10000}]`;
  // What is written where an override belongs is told by its kind, never its value, nor a field by its name: it may be an API
  // key (`"overrides": ["sk_live_…"]`, `[{"sk_live_…": {…}}]`), and this message reaches the logs and the 500's detail.
  if (!Array.isArray(value) || value.length === 0) fail(at, "overrides", `expected a non-empty array of overrides like ${example}, got ${kindOf(value)}`);
  const byKey = new Map<string, KeyOverride>();
  const namedAt = new Map<string, string>();
  Array.from(value).forEach((entry, index) => {
    const path = `overrides[${index}]`;
    if (!isObject(entry)) fail(at, path, `expected an object like ${example.slice(1, -1)}, got ${kindOf(entry)}`);
    const fields = fieldsOf(entry);
    const unknown = [...fields.keys()].filter((field) => !OVERRIDE_FIELDS.includes(field));
    for (const field of unknown) {
      const meant = slipOf(field, OVERRIDE_FIELDS);
      if (meant !== undefined) fail(at, `${path}.${field}`, `not a field of an override; did you mean ${meant}?`);
    }
    if (unknown.length > 0) {
      fail(at, path, `a field that is not one of ${OVERRIDE_FIELDS.join(", ")}: an override gives its keys a quota and nothing else (the field goes unnamed here, as it may be a key)`);
    }
    // A field given as undefined (from code) is a field left out, as in the rule.
    const given = QUOTA_FIELDS.filter((field) => fields.get(field) !== undefined);
    const unlimited = fields.get("unlimited") !== undefined;
    if (unlimited && fields.get("unlimited") !== true) fail(at, `${path}.unlimited`, `expected true (the keys are counted by no quota), or leave it out and give their own ${QUOTA_FIELDS.join(", ")}; got ${kindOf(fields.get("unlimited"))}`);
    if (unlimited && given.length > 0) fail(at, `${path}.${given[0]}`, `an unlimited key has no quota; remove ${given.join(", ")}, or "unlimited"`);
    if (!unlimited && given.length === 0) fail(at, path, `sets nothing: give the keys' own ${QUOTA_FIELDS.join(", ")} (one or more), or "unlimited": true`);
    const keys = keysOf(fields.get("keys"), rule, at, path);
    // Past newKeysPerSecond every new key is counted as #overflow: an unlimited one would let a client rotating keys through unlimited.
    if (unlimited && keys.includes(OVERFLOW_KEY)) fail(at, `${path}.keys[${(fields.get("keys") as unknown[]).indexOf(OVERFLOW_KEY)}]`, `${OVERFLOW_KEY} cannot be unlimited: past newKeysPerSecond every new key is counted under it, so a client rotating keys would go unlimited; give it a quota instead`);
    const override: KeyOverride = unlimited ? { unlimited: true } : quotaOf(() => reparse(withOverride(ruleFields, fields, given, rule)), at, path, given);
    keys.forEach((key, i) => {
      const first = namedAt.get(key);
      // By position, never by value: an override's key is often an API key, and this message reaches logs and the 500's detail.
      if (first !== undefined) fail(at, `${path}.keys[${i}]`, `is the key ${first} names (as the rule builds keys); a key has one quota: name it once`);
      namedAt.set(key, `${path}.keys[${i}]`);
      byKey.set(key, override);
    });
  });
  return byKey;
}

/**
 * The rule a request for `key` is decided under: the rule itself, or with the key's override in
 * place of its quota (`unlimited` for a key its override leaves unlimited, which the rule does not
 * decide at all). The same object for the same rule and override, so that what is kept per rule
 * object (its compiled headers) is kept once.
 */
export function ruleForKey(rule: Rule, key: string): Rule {
  const override = rule.overrides?.get(key);
  if (!override) return rule;
  let derived = overridden.get(rule);
  if (!derived) overridden.set(rule, (derived = new Map()));
  let keyed = derived.get(override);
  if (!keyed) derived.set(override, (keyed = applied(rule, override)));
  return keyed;
}

const overridden = new WeakMap<Rule, Map<KeyOverride, Rule>>();

function applied(rule: Rule, override: KeyOverride): Rule {
  if ("unlimited" in override) return { ...rule, unlimited: true };
  const keyed: Rule = { ...rule, limit: override.limit, periodMs: override.periodMs, burst: override.burst, buckets: override.buckets };
  delete keyed.delay;
  delete keyed.months;
  if (override.delay !== undefined) keyed.delay = override.delay;
  if (override.months !== undefined) keyed.months = override.months;
  return keyed;
}

/**
 * The rule's fields as written, with the override's quota in place of its own. A `burst` the rule
 * gives equal to its limit (the default, spelled out; on a sliding window the only value it takes)
 * follows an overridden limit, as it would have had the rule left it out; gcra's burst is a
 * tolerance, not tied to its limit, and stays.
 */
function withOverride(ruleFields: Fields, fields: Fields, given: readonly string[], rule: Rule): Record<string, unknown> {
  const merged = Object.fromEntries([...ruleFields].filter(([field]) => field !== "overrides"));
  if (given.includes("limit") && rule.algorithm !== "gcra" && rule.burst === rule.limit) delete merged["burst"];
  for (const field of given) merged[field] = fields.get(field);
  return merged;
}

/** The quota of the rule as written with the override; a problem it has is named at the override, at its field when the override gave that field. */
function quotaOf(parse: () => Rule, at: RuleRef, path: string, given: readonly string[]): KeyQuota {
  let rule: Rule;
  try {
    rule = parse();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const field = error.field.replace(/^(rules\[\d+\]|rule)\.?/, "");
    if (given.includes(field)) fail(at, `${path}.${field}`, error.problem);
    fail(at, path, `the rule with this override's ${given.join(", ")}: ${field === "" ? "" : `${field}: `}${error.problem}`);
  }
  const { limit, periodMs, months, burst, buckets, delay } = rule;
  return { limit, periodMs, burst, buckets, ...(months !== undefined ? { months } : {}), ...(delay !== undefined ? { delay } : {}) };
}

/** The override's keys, each as the rule builds it. */
function keysOf(value: unknown, rule: Rule, at: RuleRef, path: string): string[] {
  const example = rule.key.length === 1 ? `["k-partner"]` : `["${rule.key.map(() => "…").join("|")}"]`;
  // What was given is named by its kind, never its value: a key is often an API key, and this message reaches logs and the 500's detail.
  if (!Array.isArray(value) || value.length === 0) fail(at, `${path}.keys`, `expected a non-empty array of keys written as the admin API takes them, like ${example}, got ${kindOf(value)}`);
  return Array.from(value, (key, index) => {
    const field = `${path}.keys[${index}]`;
    if (typeof key !== "string" || key === "") fail(at, field, `expected a key written as the admin API takes it, like ${example.slice(1, -1)}, got ${kindOf(key)}`);
    if (isHashedName(key)) fail(at, field, `a #sha256 name is what a key past 1 KB is stored under, not a key a request has; write the key itself`);
    if (key === OVERFLOW_KEY && rule.newKeysPerSecond === null) fail(at, field, `${OVERFLOW_KEY} is the key new keys share past newKeysPerSecond, which this rule does not set`);
    let canonical: string;
    try {
      canonical = canonicalKey(rule, key);
    } catch (error) {
      // The service binding passes keys as they are: one it names under a rule never used by the proxy still has to fit the rule's key parts.
      if (error instanceof UnbuildableKeyError) fail(at, field, `no request has this key: ${error.message} (a key your code passes to the service binding's limit must fit the rule's "key" too: for free-form keys, give the rule one header part, "key": "header:x-key")`);
      throw error;
    }
    const outside = outsideMatch(rule, canonical);
    if (outside) fail(at, field, `no request the rule applies to has this key: ${outside}`);
    return canonical;
  });
}

/** A value as an error names what is written in an override or its keys: by its kind alone (`a string`, `an empty string`, `an object`). */
function kindOf(value: unknown): string {
  if (typeof value === "string") return value === "" ? "an empty string" : "a string";
  return show(value);
}

/** What puts the key outside the requests the rule's `match` fits (a `method` part it does not name, say), so that an override of it would never apply; undefined when some request may have it. */
function outsideMatch(rule: Rule, key: string): string | undefined {
  if (key === OVERFLOW_KEY) return undefined;
  const values = key.split("|");
  for (const [i, part] of rule.key.entries()) {
    const value = values[i]!;
    const { source } = part;
    // A request without a client address is in no list: under match.ips the rule never sees one.
    if (value === MISSING_PART && source === "ip" && rule.match.ips) return `a request without an address (${MISSING_PART}) is in none of match.ips`;
    if (value === MISSING_PART) continue;
    if (source === "method" || source === "host" || source === "path") {
      const seen = source === "path" ? unescapedPart(value) : value;
      if (!matchFits(rule, source, seen)) return `its ${source} ${show(seen)} is not one match.${source === "method" ? "methods" : source} fits (${show(source === "method" ? rule.match.methods?.join(", ") : rule.match[source])})`;
    }
    if (source === "ip" && rule.match.ips && !rule.match.ips.overlaps(value)) return `its address ${show(value)} is in none of match.ips`;
  }
  return undefined;
}
