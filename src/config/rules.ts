// Parses RATE_LIMIT_RULES once into validated rules with every default filled in, or says exactly what to fix.
import { DEFAULT_BUCKETS, MAX_BUCKETS } from "../algorithms/sliding-window";
import { MAX_LOG_LIMIT } from "../algorithms/sliding-log";
import { MAX_SLOTS } from "../algorithms/concurrency";
import { largestCost } from "../algorithms";
import type { AlgorithmName } from "../algorithms/types";
import { formatDuration, parseDuration } from "./duration";
import { parseIpList } from "../routing/cidr";
import { ConfigError, show, type RuleRef } from "./errors";
import type { Aggregate, Config, Cost, KeyPart, Mode, OnError, Rule } from "./types";

const RULE_FIELDS = [
  "name", "match", "key", "algorithm", "limit", "period", "burst", "buckets", "delay", "cost", "mode", "sync", "onError", "timeout",
  "ipv6Prefix", "newKeysPerSecond", "dryRun", "block", "slotTtl", "warmup", "aggregate",
];
const MATCH_FIELDS = ["path", "methods", "host", "ips"];
/** The first choice is the default. */
const ALGORITHMS: Choices<AlgorithmName> = ["sliding-window", "token-bucket", "fixed-window", "sliding-log", "gcra", "concurrency"];
const MODES: Choices<Mode> = ["strict", "fast"];
const ON_ERROR: Choices<OnError> = ["local", "allow", "deny"];
const AGGREGATE: Choices<"none" | Aggregate> = ["auto", "none", "location", "continent"];
/** How often a fast-mode isolate reconciles with the Durable Object when the rule names nothing else. */
const DEFAULT_SYNC_MS = 1_000;
/** How long a concurrency slot is held when its request never gives it back: its isolate vanished. */
const DEFAULT_SLOT_TTL_MS = 60_000;
/** How long a decision may wait for the Durable Object before the rule's onError policy decides. */
const DEFAULT_TIMEOUT_MS = 1_000;
/** The prefix most ISPs delegate to one customer (RFC 6177), and express-rate-limit's default. */
const DEFAULT_IPV6_PREFIX = 56;
/** Shorter prefixes than this would group whole providers, longer than 128 bits there are none. */
const IPV6_PREFIX_RANGE = [32, 128] as const;
const PLAIN_PARTS = ["ip", "path", "method", "host", "global"] as const;
const KEY_PARTS_HINT = "ip, path, method, host, global, header:<name>, query:<name> or cookie:<name>";

const NAME = /^[a-z0-9_-]{1,64}$/;
/** RFC 9110 token: HTTP methods, header names and (RFC 6265) cookie names are all tokens. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HOST = /^[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::([0-9]{1,5}))?$/i;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

type Fields = Map<string, unknown>;
type Choices<T extends string> = readonly [T, ...T[]];
/** The most units a key can ever hold: the burst for token-bucket, 1 + burst for gcra, the limit for the others. */
type Capacity = { field: "limit" | "burst"; units: number; what: string };

/** A rule in the user-facing format, as the admin API shows it. */
export interface RuleDescription {
  name: string;
  match: { path: string; methods: string[] | null; host: string | null; ips?: readonly string[] };
  key: string[];
  algorithm: AlgorithmName;
  limit: number;
  /** shortest exact form, e.g. "1m"; absent for concurrency, which has `slotTtl` instead */
  period?: string;
  periodMs?: number;
  /** concurrency only, e.g. "1m" */
  slotTtl?: string;
  burst: number;
  buckets: number;
  /** gcra only */
  delay?: number;
  /** token-bucket only, e.g. "30s"; only when set */
  warmup?: string;
  /** units per request, or "header:<name>" */
  cost: number | string;
  mode: Mode;
  /** fast mode only, e.g. "1s" */
  sync?: string;
  /** fast mode only, when set: "location" or "continent" */
  aggregate?: Aggregate;
  onError: OnError;
  timeout: string;
  /** only for rules whose key has an `ip` part */
  ipv6Prefix?: number;
  newKeysPerSecond?: number;
  dryRun: boolean;
  /** e.g. "10m"; only when set */
  block?: string;
}

/**
 * Validates the `RATE_LIMIT_RULES` binding: a JSON string, or the object wrangler makes of a TOML
 * table, shaped `{"rules": [...]}` or as a bare array. Absent or blank means no rules.
 * Throws a {@link ConfigError} naming the first rule and field at fault.
 *
 * @example
 * parseConfig('[{"name": "login", "limit": 5, "period": "1m"}]').rules[0].key; // [{ source: "ip" }]
 */
export function parseConfig(raw: unknown): Config {
  const rules = ruleList(decode(raw)).map((value, index) => parseRule(value, index));
  rejectDuplicateNames(rules);
  return { rules };
}

/**
 * What means nothing in a rule used from code: your code gives the key, used as is (so no prefix
 * groups IPv6 addresses in it), and no request is matched.
 */
const STANDALONE_EXCLUDED = ["match", "key", "ipv6Prefix"];
const STANDALONE_FIELDS = RULE_FIELDS.filter((field) => !STANDALONE_EXCLUDED.includes(field));

/**
 * Validates one rule used from code (the library's `limiter`, the Hono middleware): the fields of
 * a `RATE_LIMIT_RULES` rule, with the same defaults and messages, except `match`, `key` and
 * `ipv6Prefix`, which are errors there, and a header `cost` unless the rule decides requests
 * (`{ requests: true }`: the middleware reads it from each request as the proxy does). Throws a
 * {@link ConfigError} naming the field, e.g. `rule ("api").period: …`.
 *
 * @example
 * parseStandaloneRule({ name: "api", limit: 100, period: "1m" }).periodMs; // 60000
 */
export function parseStandaloneRule(value: unknown, { requests = false } = {}): Rule {
  const fields = isObject(value) ? fieldsOf(value) : undefined;
  for (const field of STANDALONE_EXCLUDED) {
    if (!fields?.has(field)) continue;
    const name = fields.get("name");
    const at: RuleRef = typeof name === "string" && NAME.test(name) ? { name } : {};
    fail(at, field, `has no meaning for a rule used from code (your code gives the key, used as is, and no request is matched); remove it`);
  }
  const rule = parseRule(value, undefined, STANDALONE_FIELDS);
  if (!requests && "header" in rule.cost) {
    fail({ name: rule.name }, "cost", `a header cost needs a request, and limit is given a key, not a request; pass { cost } to limit instead`);
  }
  return rule;
}

/**
 * A parsed rule in the format users write, with every default filled in.
 *
 * @example
 * describeRule(rule); // { name: "login", key: ["ip"], period: "1m", periodMs: 60000, cost: 1, … }
 */
export function describeRule(rule: Rule): RuleDescription {
  const { match, cost } = rule;
  return {
    name: rule.name,
    match: { path: match.path, methods: match.methods && [...match.methods], host: match.host, ...(match.ips ? { ips: [...match.ips.entries] } : {}) },
    key: rule.key.map(formatKeyPart),
    algorithm: rule.algorithm,
    limit: rule.limit,
    ...(rule.algorithm === "concurrency" ? { slotTtl: formatDuration(rule.periodMs) } : { period: formatDuration(rule.periodMs), periodMs: rule.periodMs }),
    burst: rule.burst,
    buckets: rule.buckets,
    ...(rule.delay !== undefined ? { delay: rule.delay } : {}),
    ...(rule.warmupMs !== undefined ? { warmup: formatDuration(rule.warmupMs) } : {}),
    cost: "units" in cost ? cost.units : `header:${cost.header}`,
    mode: rule.mode,
    ...(rule.mode === "fast" ? { sync: formatDuration(rule.syncMs) } : {}),
    ...(rule.aggregate ? { aggregate: rule.aggregate } : {}),
    onError: rule.onError,
    timeout: formatDuration(rule.timeoutMs),
    ...(hasIpPart(rule.key) ? { ipv6Prefix: rule.ipv6Prefix } : {}),
    ...(rule.newKeysPerSecond !== null ? { newKeysPerSecond: rule.newKeysPerSecond } : {}),
    dryRun: rule.dryRun,
    ...(rule.blockMs !== null ? { block: formatDuration(rule.blockMs) } : {}),
  };
}

function decode(raw: unknown): unknown {
  if (raw === undefined) return [];
  if (typeof raw !== "string") return raw;
  if (raw.trim() === "") return [];
  try {
    return JSON.parse(raw);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw ConfigError.topLevel(`not valid JSON (${reason}); write {"rules": [...]} or a bare array of rules`);
  }
}

function ruleList(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (!isObject(value)) {
    throw ConfigError.topLevel(`expected {"rules": [...]} or an array of rules, got ${show(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (key !== "rules") {
      throw ConfigError.topLevel(`unknown key ${show(key)}; the only top-level key is "rules", an array of rules`);
    }
  }
  const rules = fieldsOf(value).get("rules");
  if (!Array.isArray(rules)) {
    throw ConfigError.topLevel(`expected an array of rules (an empty array for none), got ${show(rules)}`, "rules");
  }
  return rules;
}

function parseRule(value: unknown, index: number | undefined, allowed: readonly string[] = RULE_FIELDS): Rule {
  if (!isObject(value)) {
    const example = `{"name": "api", "limit": 100, "period": "1m"}`;
    fail({ index }, undefined, `expected a rule object like ${example}, got ${show(value)}`);
  }
  const fields = fieldsOf(value);
  const claimed = fields.get("name");
  const at: RuleRef = typeof claimed === "string" && NAME.test(claimed) ? { index, name: claimed } : { index };
  rejectUnknown(fields, allowed, at, undefined);

  const name = parseName(claimed, at);
  const match = parseMatch(fields.get("match"), at);
  const key = parseKey(fields.get("key"), at);
  const algorithm = parseChoice(fields.get("algorithm"), ALGORITHMS, at, "algorithm");
  const limit = parseLimit(fields.get("limit"), at);
  if (algorithm === "sliding-log" && limit > MAX_LOG_LIMIT) {
    const why = `a sliding log keeps the time of every request it admits in the period, so its state grows with the limit`;
    fail(at, "limit", `expected at most ${MAX_LOG_LIMIT} for "sliding-log" (${why}), got ${limit}; use "sliding-window" for larger limits`);
  }
  if (algorithm === "concurrency" && limit > MAX_SLOTS) {
    const why = `its state keeps the time of every admission in flight`;
    fail(at, "limit", `expected at most ${MAX_SLOTS} for "concurrency" (${why}), got ${limit}`);
  }
  const periodMs = algorithm === "concurrency" ? parseSlotTtl(fields, at) : parsePeriod(fields.get("period"), at);
  if (algorithm !== "concurrency" && fields.has("slotTtl")) {
    fail(at, "slotTtl", `slotTtl applies to concurrency only; remove it, or set "algorithm": "concurrency"`);
  }
  const burst = parseBurst(fields.get("burst"), algorithm, limit, at);
  const delay = parseDelay(fields.get("delay"), algorithm, burst, at);
  const warmupMs = parseWarmup(fields.get("warmup"), algorithm, at);
  const capacity = capacityOf(algorithm, limit, burst);
  requireExactArithmetic(limit, capacity.units, periodMs, at);
  const cost = parseCost(fields.get("cost"), capacity, at);
  const mode = parseChoice(fields.get("mode"), MODES, at, "mode");
  if (algorithm === "gcra" && mode === "fast") {
    const why = `GCRA spaces a key's requests one emission interval apart, and a fast-mode lease lets each isolate spend its units at once, which would turn that spacing into bursts`;
    fail(at, "mode", `"gcra" is strict-only: ${why}; use "strict", or "token-bucket" in fast mode`);
  }
  if (algorithm === "concurrency" && mode === "fast") {
    const why = `a slot comes back the moment its response ends, and a fast-mode lease would split the few slots among isolates, each keeping its share until its next sync, so a slot freed in one isolate could serve no other and most isolates would hold none`;
    fail(at, "mode", `"concurrency" is strict-only: ${why}; use "strict"`);
  }
  if (warmupMs !== undefined) requireWarmupFits(warmupMs, limit, burst, periodMs, mode, at);
  const syncMs = parseSync(fields.get("sync"), mode, at);
  const aggregate = parseAggregate(fields.get("aggregate"), mode, at);
  const buckets = parseBuckets(fields.get("buckets"), algorithm, periodMs, at);
  const onError = parseChoice(fields.get("onError"), ON_ERROR, at, "onError");
  const timeoutMs = fields.has("timeout") ? parseDurationField(fields.get("timeout"), at, "timeout") : DEFAULT_TIMEOUT_MS;
  const ipv6Prefix = parseIpv6Prefix(fields.get("ipv6Prefix"), key, at);
  const newKeysPerSecond = fields.has("newKeysPerSecond") ? parseCount(fields.get("newKeysPerSecond"), at, "newKeysPerSecond") : null;
  const dryRun = parseBoolean(fields.get("dryRun"), at, "dryRun");
  const blockMs = fields.has("block") ? parseDurationField(fields.get("block"), at, "block") : null;
  const rule: Rule = { name, match, key, algorithm, limit, periodMs, burst, buckets, cost, mode, syncMs, onError, timeoutMs, ipv6Prefix, newKeysPerSecond, dryRun, blockMs };
  if (delay !== undefined) rule.delay = delay;
  if (warmupMs !== undefined) rule.warmupMs = warmupMs;
  if (aggregate !== "none") rule.aggregate = aggregate;
  return rule;
}

function parseName(value: unknown, at: RuleRef): string {
  const form = `1 to 64 characters from a-z, 0-9, "_" and "-", e.g. "api-per-key"`;
  if (value === undefined) fail(at, "name", `required: ${form}`);
  if (typeof value !== "string" || !NAME.test(value)) fail(at, "name", `expected ${form}, got ${show(value)}`);
  return value;
}

function parseMatch(value: unknown, at: RuleRef): Rule["match"] {
  if (value === undefined) return { path: "*", methods: null, host: null, ips: null };
  if (!isObject(value)) {
    fail(at, "match", `expected an object like {"path": "/api/*", "methods": ["GET"]}, got ${show(value)}`);
  }
  const fields = fieldsOf(value);
  rejectUnknown(fields, MATCH_FIELDS, at, "match");
  return {
    path: parsePath(fields.get("path"), at),
    methods: parseMethods(fields.get("methods"), at),
    host: parseHost(fields.get("host"), at),
    ips: fields.has("ips") ? parseIpList(fields.get("ips") as readonly string[], { field: "match.ips", rule: at }) : null,
  };
}

function parsePath(value: unknown, at: RuleRef): string {
  const field = "match.path";
  const form = `a glob starting with "/", like "/api/*", or "*" for every path`;
  if (value === undefined) return "*";
  if (typeof value !== "string") fail(at, field, `expected ${form}, got ${show(value)}`);
  if (value === "") fail(at, field, `must not be empty; write ${form}`);
  if (/[\s\p{Cc}]/u.test(value)) {
    fail(at, field, `must not contain whitespace or control characters, got ${show(value)}`);
  }
  const cut = /[?#]/.exec(value);
  if (cut !== null) {
    const fix = `remove "${cut[0]}" and what follows from ${show(value)}`;
    fail(at, field, `globs match the path only, not the query string or fragment; ${fix}`);
  }
  if (value !== "*" && !value.startsWith("/")) fail(at, field, `expected ${form}, got ${show(value)}`);
  return value;
}

function parseMethods(value: unknown, at: RuleRef): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0) {
    const form = `a non-empty array of HTTP methods like ["GET", "POST"] (leave it out for every method)`;
    fail(at, "match.methods", `expected ${form}, got ${show(value)}`);
  }
  const methods = value.map((method: unknown, i) => {
    if (typeof method !== "string" || !TOKEN.test(method)) {
      fail(at, `match.methods[${i}]`, `expected an HTTP method like "GET", got ${show(method)}`);
    }
    return method.toUpperCase();
  });
  return [...new Set(methods)];
}

function parseHost(value: unknown, at: RuleRef): string | null {
  if (value === undefined || value === null) return null;
  const port = typeof value === "string" ? HOST.exec(value)?.[1] : undefined;
  const valid = typeof value === "string" && HOST.test(value) && (port === undefined || isPort(Number(port)));
  if (!valid) {
    const form = `a host name like "api.example.com", optionally with ":port" (leave it out for every host)`;
    fail(at, "match.host", `expected ${form}, got ${show(value)}`);
  }
  return value.toLowerCase();
}

function parseKey(value: unknown, at: RuleRef): KeyPart[] {
  if (value === undefined) return [{ source: "ip" }];
  if (typeof value === "string") return [parseKeyPart(value, at, "key")];
  if (!Array.isArray(value) || value.length === 0) {
    const form = `a key part like "ip" or "header:x-api-key", or a non-empty array of them`;
    fail(at, "key", `expected ${form}, got ${show(value)}`);
  }
  const parts = value.map((part: unknown, i) => parseKeyPart(part, at, `key[${i}]`));
  rejectRepeatedParts(parts, at);
  return parts;
}

function parseKeyPart(value: unknown, at: RuleRef, field: string): KeyPart {
  if (typeof value !== "string") fail(at, field, `expected a key part (${KEY_PARTS_HINT}), got ${show(value)}`);
  const plain = PLAIN_PARTS.find((source) => source === value);
  if (plain !== undefined) return { source: plain };
  const colon = value.indexOf(":");
  const source = colon === -1 ? value : value.slice(0, colon);
  const name = colon === -1 ? "" : value.slice(colon + 1);
  const got = `, got ${show(value)}`;
  switch (source) {
    case "header":
      if (!TOKEN.test(name)) fail(at, field, `expected "header:<name>" with a header name like "x-api-key"${got}`);
      return { source, name: name.toLowerCase() };
    case "query":
      if (name === "") fail(at, field, `expected "query:<name>" with a parameter name, e.g. "query:api_key"${got}`);
      return { source, name };
    case "cookie":
      if (!TOKEN.test(name)) fail(at, field, `expected "cookie:<name>" with a cookie name like "session"${got}`);
      return { source, name };
  }
  fail(at, field, `unknown key part ${show(value)}; use ${KEY_PARTS_HINT}`);
}

function parseBoolean(value: unknown, at: RuleRef, field: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") fail(at, field, `expected true or false (default false), got ${show(value)}`);
  return value;
}

function parseIpv6Prefix(value: unknown, key: KeyPart[], at: RuleRef): number {
  if (value === undefined) return DEFAULT_IPV6_PREFIX;
  if (!hasIpPart(key)) fail(at, "ipv6Prefix", `ipv6Prefix applies to rules whose key has an "ip" part; remove it, or add "ip" to the key`);
  const [min, max] = IPV6_PREFIX_RANGE;
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    fail(at, "ipv6Prefix", `expected a prefix length from ${min} to ${max} (default ${DEFAULT_IPV6_PREFIX}, a /56), got ${show(value)}`);
  }
  return value as number;
}

function hasIpPart(key: readonly KeyPart[]): boolean {
  return key.some((part) => part.source === "ip");
}

function rejectRepeatedParts(parts: KeyPart[], at: RuleRef): void {
  const firstAt = new Map<string, number>();
  parts.forEach((part, i) => {
    const text = formatKeyPart(part);
    const first = firstAt.get(text);
    if (first !== undefined) fail(at, `key[${i}]`, `repeats key[${first}] (${show(text)}); list each part once`);
    firstAt.set(text, i);
  });
}

function parseChoice<T extends string>(value: unknown, choices: Choices<T>, at: RuleRef, field: string): T {
  if (value === undefined) return choices[0];
  const choice = choices.find((candidate) => candidate === value);
  if (choice === undefined) {
    const allowed = choices.map((c) => JSON.stringify(c)).join(" or ");
    fail(at, field, `expected ${allowed} (default ${JSON.stringify(choices[0])}), got ${show(value)}`);
  }
  return choice;
}

function parseLimit(value: unknown, at: RuleRef): number {
  if (value === undefined) fail(at, "limit", `required: a positive integer, e.g. 100`);
  return parseCount(value, at, "limit");
}

function parseCount(value: unknown, at: RuleRef, field: string): number {
  if (!isCount(value)) {
    fail(at, field, `expected a positive integer (at most ${Number.MAX_SAFE_INTEGER}), got ${show(value)}`);
  }
  return value;
}

function parsePeriod(value: unknown, at: RuleRef): number {
  if (value === undefined) fail(at, "period", `required: a duration like "1m" or "10s", or a number of seconds`);
  return parseDurationField(value, at, "period");
}

/** A concurrency rule holds slots rather than counting over a period: `slotTtl` bounds a slot, and `period` means nothing. */
function parseSlotTtl(fields: Fields, at: RuleRef): number {
  if (fields.has("period")) {
    fail(at, "period", `"concurrency" has no period: a slot is held until its response has been sent, or for slotTtl at most (default "1m"); remove period`);
  }
  return fields.has("slotTtl") ? parseDurationField(fields.get("slotTtl"), at, "slotTtl") : DEFAULT_SLOT_TTL_MS;
}

function parseDurationField(value: unknown, at: RuleRef, field: string): number {
  const parsed = parseDuration(value);
  if (!parsed.ok) fail(at, field, parsed.problem);
  return parsed.ms;
}

function parseSync(value: unknown, mode: Mode, at: RuleRef): number {
  if (value === undefined) return DEFAULT_SYNC_MS;
  if (mode !== "fast") fail(at, "sync", `sync applies to fast mode only; remove it, or set "mode": "fast"`);
  return parseDurationField(value, at, "sync");
}

function parseAggregate(value: unknown, mode: Mode, at: RuleRef): "none" | Aggregate {
  if (value === undefined) return mode === "fast" ? "auto" : "none";
  const aggregate = parseChoice(value, AGGREGATE, at, "aggregate");
  if (aggregate !== "none" && mode !== "fast") {
    fail(at, "aggregate", `aggregate applies to fast mode only (a strict rule's every decision is its object's); remove it, or set "mode": "fast"`);
  }
  return aggregate;
}

function parseBurst(value: unknown, algorithm: AlgorithmName, limit: number, at: RuleRef): number {
  if (algorithm === "gcra") {
    if (value === undefined) return 0;
    if (!Number.isSafeInteger(value) || (value as number) < 0) {
      fail(at, "burst", `expected the tolerance in units for "gcra": an integer, 0 or more (default 0), got ${show(value)}`);
    }
    return value as number;
  }
  if (value === undefined) return limit;
  const burst = parseCount(value, at, "burst");
  if (algorithm !== "token-bucket" && burst !== limit) {
    fail(at, "burst", `burst applies to token-bucket and gcra only; remove it, or set "algorithm": "token-bucket"`);
  }
  return burst;
}

/**
 * gcra's `delay` (nginx's two-stage `delay=`): 0 to `burst`, default `burst`. Of a burst, the first
 * 1 + delay requests pass at once and the rest of the tolerance is held until it conforms.
 */
function parseDelay(value: unknown, algorithm: AlgorithmName, burst: number, at: RuleRef): number | undefined {
  if (algorithm !== "gcra") {
    if (value !== undefined) fail(at, "delay", `delay applies to gcra only; remove it, or set "algorithm": "gcra"`);
    return undefined;
  }
  if (value === undefined) return burst;
  if (!Number.isSafeInteger(value) || (value as number) < 0 || (value as number) > burst) {
    fail(at, "delay", `expected an integer from 0 to the burst (${burst}), got ${show(value)}`);
  }
  return value as number;
}

/**
 * The default is the bucket count the accuracy benchmark chose (bench/RESULTS.md), with each bucket
 * at least 1 ms long, in both modes: fast isolates report their spends in the buckets they were
 * made in, so fast mode gains from fine buckets as strict does.
 */
function parseBuckets(value: unknown, algorithm: AlgorithmName, periodMs: number, at: RuleRef): number {
  if (value === undefined) return algorithm === "sliding-window" ? Math.min(DEFAULT_BUCKETS, periodMs) : 1;
  const buckets = parseCount(value, at, "buckets");
  if (algorithm !== "sliding-window" && buckets !== 1) {
    fail(at, "buckets", `buckets applies to sliding-window only; remove it, or set "algorithm": "sliding-window"`);
  }
  if (buckets > MAX_BUCKETS) fail(at, "buckets", `expected at most ${MAX_BUCKETS} buckets, got ${buckets}`);
  if (buckets > periodMs) {
    fail(at, "buckets", `each bucket must last at least 1ms: ${buckets} buckets need a period of ${buckets}ms or more`);
  }
  return buckets;
}

function parseWarmup(value: unknown, algorithm: AlgorithmName, at: RuleRef): number | undefined {
  if (value === undefined) return undefined;
  if (algorithm !== "token-bucket") fail(at, "warmup", `warmup applies to token-bucket only; remove it, or set "algorithm": "token-bucket"`);
  return parseDurationField(value, at, "warmup");
}

/** A warmup is strict-only, and its coldness is counted in exact integers as the bucket's tokens are. */
function requireWarmupFits(warmupMs: number, limit: number, burst: number, periodMs: number, mode: Mode, at: RuleRef): void {
  if (mode === "fast") {
    const why = `the refill depends on when each unit is taken and how long the bucket has sat full, and the object learns what a lease spent only at the next sync, so a busy key's bucket would look idle and cool between syncs`;
    fail(at, "warmup", `a warmup is strict-only: ${why}; remove it, or use "mode": "strict"`);
  }
  if (2 * limit * warmupMs + 3 * burst * periodMs > Number.MAX_SAFE_INTEGER) {
    fail(at, "warmup", `2 × limit × warmup + 3 × burst × period must not exceed ${Number.MAX_SAFE_INTEGER} so counting stays exact; use a shorter warmup`);
  }
}

/** The algorithms count in exact integers of units × ms; past 2^53 they would silently round. */
function requireExactArithmetic(limit: number, burst: number, periodMs: number, at: RuleRef): void {
  const field = burst > limit ? "burst" : "limit";
  const units = Math.max(limit, burst);
  if (units * periodMs > Number.MAX_SAFE_INTEGER) {
    const product = `${field} × period (${units} × ${periodMs}ms)`;
    const fix = `use a shorter period or a smaller ${field}`;
    fail(at, field, `${product} must not exceed ${Number.MAX_SAFE_INTEGER} unit·ms so counting stays exact; ${fix}`);
  }
}

function parseCost(value: unknown, capacity: Capacity, at: RuleRef): Cost {
  if (value === undefined) return { units: 1 };
  const header = typeof value === "string" && /^header:(.+)$/.exec(value)?.[1];
  if (header && TOKEN.test(header)) return { header: header.toLowerCase() };
  if (!isCount(value)) {
    fail(at, "cost", `expected a positive integer, or "header:<name>" like "header:x-cost", got ${show(value)}`);
  }
  const { field, units, what } = capacity;
  if (value > units) {
    const why = `so no request could ever be admitted; lower the cost or raise the ${field}`;
    fail(at, "cost", `a cost of ${value} exceeds ${what}, ${why}`);
  }
  return { units: value };
}

function rejectDuplicateNames(rules: Rule[]): void {
  const firstAt = new Map<string, number>();
  rules.forEach(({ name }, index) => {
    const first = firstAt.get(name);
    if (first !== undefined) {
      fail({ index, name }, "name", `rules[${first}] already has this name; give each rule its own name`);
    }
    firstAt.set(name, index);
  });
}

function rejectUnknown(fields: Fields, allowed: readonly string[], at: RuleRef, parent: string | undefined): void {
  for (const key of fields.keys()) {
    if (!allowed.includes(key)) {
      fail(at, childPath(parent, key), `unknown field; allowed fields here are ${allowed.join(", ")}`);
    }
  }
}

/** `match.path`, or `match["odd key"]` when the key would not read as one path segment. */
function childPath(parent: string | undefined, key: string): string {
  if (!IDENTIFIER.test(key)) return `${parent ?? ""}[${JSON.stringify(key)}]`;
  return parent === undefined ? key : `${parent}.${key}`;
}

function capacityOf(algorithm: AlgorithmName, limit: number, burst: number): Capacity {
  const units = largestCost({ algorithm, limit, burst });
  switch (algorithm) {
    case "token-bucket":
      return { field: "burst", units, what: `the rule's burst of ${burst}` };
    case "gcra":
      return { field: "burst", units, what: `the ${units} units a gcra rule admits at once (1 + its burst of ${burst})` };
    default:
      return { field: "limit", units, what: `the rule's limit of ${limit}` };
  }
}

function formatKeyPart(part: KeyPart): string {
  return "name" in part ? `${part.source}:${part.name}` : part.source;
}

/** Own enumerable fields only, so nothing is ever read from a prototype. */
function fieldsOf(value: object): Fields {
  return new Map(Object.entries(value));
}

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

function isPort(port: number): boolean {
  return port >= 1 && port <= 65_535;
}

function fail(at: RuleRef, field: string | undefined, problem: string): never {
  throw ConfigError.inRule(at, field, problem);
}
