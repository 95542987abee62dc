/** Parses RATE_LIMIT_RULES once into validated rules with every default filled in, or says exactly what to fix. */
import { MAX_SLOTS } from "../algorithms/concurrency";
import { MAX_LOG_LIMIT } from "../algorithms/sliding-log";
import type { AlgorithmName } from "../algorithms/types";
import { capacityOf, parseBuckets, parseBurst, parseCost, parseDelay, parseResponseCost, parseWarmup, requireExactArithmetic, requireWarmupFits } from "./algorithm-fields";
import { parseDenyResponse } from "./deny-response";
import { formatDuration } from "./duration";
import { ConfigError, show, type RuleRef } from "./errors";
import { liberty, lineAndColumn, pathText, repeatedMember, syntaxErrorAt, type Repeated } from "./json";
import { fail, fieldsOf, given, isObject, parseBoolean, parseChoice, parseCount, parseDurationField, rejectUnknown, type Choices, type Fields } from "./fields";
import { formatKeyPart, hasIpPart, parseIpv6Prefix, parseKey } from "./key-parts";
import { parseMatch } from "./match";
import { parseOverrides, ruleForKey } from "./overrides";
import type { Aggregate, Config, Count, DenyResponse, KeyOverride, Mode, OnError, Rule } from "./types";

const RULE_FIELDS = [
  "name", "match", "key", "algorithm", "limit", "period", "burst", "buckets", "delay", "cost", "mode", "sync", "onError", "timeout",
  "ipv6Prefix", "newKeysPerSecond", "dryRun", "block", "slotTtl", "warmup", "aggregate",
  "count", "responseCost", "denyResponse", "overrides",
];
/** The first choice is the default. */
const ALGORITHMS: Choices<AlgorithmName> = ["sliding-window", "token-bucket", "fixed-window", "sliding-log", "gcra", "concurrency"];
const MODES: Choices<Mode> = ["strict", "fast"];
const ON_ERROR: Choices<OnError> = ["local", "allow", "deny"];
const AGGREGATE: Choices<"none" | Aggregate> = ["auto", "none", "location", "continent"];
const COUNTS: Choices<Count> = ["all", "failed", "successful"];
/** How often a fast-mode isolate reconciles with the Durable Object when the rule names nothing else. */
const DEFAULT_SYNC_MS = 1_000;
/** How long a concurrency slot is held when its request never gives it back: its isolate vanished. */
const DEFAULT_SLOT_TTL_MS = 60_000;
/** How long a decision may wait for the Durable Object before the rule's onError policy decides. */
const DEFAULT_TIMEOUT_MS = 1_000;

const NAME = /^[a-z0-9_-]{1,64}$/;

/** A rule in the user-facing format, as the admin API shows it. */
export interface RuleDescription {
  name: string;
  match: { path: string; methods: string[] | null; host: string | null; ips?: readonly string[] };
  key: string[];
  algorithm: AlgorithmName;
  limit: number;
  /** shortest exact form, e.g. "1m", or a calendar period, "1mo" or "1y"; absent for concurrency, which has `slotTtl` instead */
  period?: string;
  /** with a calendar period, the longest window (31 days a month) */
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
  /** fast mode only: "auto" (the default), "location" or "continent"; left out for "none" */
  aggregate?: Aggregate;
  onError: OnError;
  timeout: string;
  /** only for rules whose key has an `ip` part */
  ipv6Prefix?: number;
  newKeysPerSecond?: number;
  dryRun: boolean;
  /** e.g. "10m"; only when set */
  block?: string;
  /** "failed" or "successful"; only when set */
  count?: Count;
  /** "header:<name>"; only when set */
  responseCost?: string;
  /** only when set: the status, and the body with its content type when given */
  denyResponse?: { status: number; body?: string; contentType?: string };
  /** only when set: each override's keys (as the rule builds them) and the quota they have */
  overrides?: ({ keys: string[] } & QuotaDescription)[];
}

/** A key's quota as described: the rule's quota fields, or none at all. */
export type QuotaDescription = Pick<RuleDescription, "limit" | "period" | "burst" | "delay"> | { unlimited: true };

/**
 * Validates the `RATE_LIMIT_RULES` binding: a JSON string, or the object wrangler makes of a TOML
 * table, shaped `{"rules": [...]}` or as a bare array. Absent or blank means no rules.
 * Throws a {@link ConfigError} naming the first rule and field at fault.
 *
 * @example
 * parseConfig('[{"name": "login", "limit": 5, "period": "1m"}]').rules[0].key; // [{ source: "ip" }]
 */
export function parseConfig(raw: unknown): Config {
  // Array.from visits a hole (a list built in code) as undefined, where map would skip it and keep it; so do the lists inside a rule.
  const rules = Array.from(ruleList(decode(raw)), (value, index) => parseRule(value, index));
  rejectDuplicateNames(rules);
  return { rules };
}

const NO_MEANING = "has no meaning for a rule used from code (your code gives the key, used as is, and no request is matched); remove it";
/**
 * What a rule used from code cannot have, and why: your code gives the key, used as is (so no
 * prefix groups IPv6 addresses in it), no request is matched, and your code picks each key's rule.
 */
const FROM_CODE_REFUSED: Record<string, string> = {
  match: NO_MEANING,
  key: NO_MEANING,
  ipv6Prefix: NO_MEANING,
  overrides: "your code picks each key's rule: give keys with their own quota a limiter of their own (in the middleware, a rule function); remove it",
};
/** What a rule used with a key alone (`limiter`) cannot have either: it sees no response and answers no denial. */
const KEY_ALONE_REFUSED: Record<string, string> = {
  responseCost: "a response cost needs a response, and limit never sees one; call charge(units) on limit's result once the cost is known instead",
  denyResponse: "limit answers with a LimitResult, not a response: your code answers a denial (success: false) as it likes; remove it",
};
const STANDALONE_FIELDS = RULE_FIELDS.filter((field) => !Object.hasOwn(FROM_CODE_REFUSED, field));
const KEY_ALONE_FIELDS = STANDALONE_FIELDS.filter((field) => !Object.hasOwn(KEY_ALONE_REFUSED, field));

/**
 * Validates one rule used from code (the library's `limiter`, the Hono middleware): the fields of
 * a `RATE_LIMIT_RULES` rule, with the same defaults and messages, except `match`, `key` and
 * `ipv6Prefix`, which are errors there, and a header `cost`, a `responseCost` or a `denyResponse`
 * unless the rule decides requests (`{ requests: true }`: the middleware reads them from each
 * request and its response, and answers its denials, as the proxy does). Throws a
 * {@link ConfigError} naming the field, e.g. `rule ("api").period: …`; an unknown field's
 * message lists only the fields the rule may have here.
 *
 * @example
 * parseStandaloneRule({ name: "api", limit: 100, period: "1m" }).periodMs; // 60000
 */
export function parseStandaloneRule(value: unknown, { requests = false } = {}): Rule {
  const fields = isObject(value) ? fieldsOf(value) : undefined;
  const refused = requests ? FROM_CODE_REFUSED : { ...FROM_CODE_REFUSED, ...KEY_ALONE_REFUSED };
  for (const [field, why] of Object.entries(refused)) {
    if (fields?.has(field)) fail(ruleRef(undefined, fields.get("name")), field, why);
  }
  const rule = parseRule(value, undefined, requests ? STANDALONE_FIELDS : KEY_ALONE_FIELDS);
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
    ...(rule.algorithm === "concurrency" ? { slotTtl: formatDuration(rule.periodMs) } : { period: rule.months !== undefined ? formatMonths(rule.months) : formatDuration(rule.periodMs), periodMs: rule.periodMs }),
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
    ...(rule.count !== "all" ? { count: rule.count } : {}),
    ...(rule.responseCost ? { responseCost: `header:${rule.responseCost.header}` } : {}),
    ...(rule.blockMs !== null ? { block: formatDuration(rule.blockMs) } : {}),
    ...(rule.denyResponse ? { denyResponse: describeDenyResponse(rule.denyResponse) } : {}),
    ...(rule.overrides ? { overrides: describeOverrides(rule) } : {}),
  };
}

/** The overrides as written: the keys sharing one override together, with the quota it gives them. */
function describeOverrides(rule: Rule): NonNullable<RuleDescription["overrides"]> {
  const byOverride = new Map<KeyOverride, string[]>();
  for (const [key, override] of rule.overrides ?? []) {
    const keys = byOverride.get(override);
    if (keys) keys.push(key);
    else byOverride.set(override, [key]);
  }
  return [...byOverride.values()].map((keys) => ({ keys, ...describeQuota(ruleForKey(rule, keys[0]!)) }));
}

/** The quota a rule gives a key (with the key's override, if it has one: see ruleForKey), as the rule's own is described. */
export function describeQuota(keyed: Rule): QuotaDescription {
  if (keyed.unlimited) return { unlimited: true };
  const { limit, periodMs, months, burst, delay } = keyed;
  return {
    limit,
    ...(keyed.algorithm === "concurrency" ? {} : { period: months !== undefined ? formatMonths(months) : formatDuration(periodMs) }),
    burst,
    ...(delay !== undefined ? { delay } : {}),
  };
}

function describeDenyResponse({ status, body }: DenyResponse): NonNullable<RuleDescription["denyResponse"]> {
  return { status, ...(body ? { body: body.text, contentType: body.contentType } : {}) };
}

/**
 * The part of V8's JSON.parse message that quotes the text around the fault (`Unexpected token ']',
 * ..."sk_live_…"]},]}]" is not valid JSON`): the rules hold override keys, often API keys, and this
 * message reaches the logs and the 500's detail.
 */
const QUOTED_SOURCE = /, (?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON$/;

/**
 * Where V8 says the fault is, when it says: the message says it for every fault, in one form. Its
 * offset counts from 0 and its column may not be the walk's (which points at a bad string's or
 * number's start): two positions in one line would contradict each other.
 */
const POSITION = /(?: in JSON)? at position \d+(?: \(line \d+ column \d+\))?$/;

/** Why `text` is not JSON, with the line and column of the fault, and what to do when it is a liberty JSON refuses. */
function notJson(text: string, reason: string): string {
  const rewrite = `write {"rules": [...]} or a bare array of rules`;
  const at = syntaxErrorAt(text);
  if (at === undefined) return `not valid JSON (${reason}); ${rewrite}`;
  const slip = liberty(text, at);
  const { line, column } = lineAndColumn(text, slip?.at ?? at);
  const where = `not valid JSON at line ${line} column ${column} (${reason})`;
  return slip ? `${where}: ${slip.what}, which JSON does not allow; remove it` : `${where}; ${rewrite}`;
}

function decode(raw: unknown): unknown {
  if (raw === undefined) return [];
  if (typeof raw !== "string") return raw;
  if (raw.trim() === "") return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    const reason = (error instanceof Error ? error.message : String(error)).replace(QUOTED_SOURCE, "").replace(POSITION, "");
    throw ConfigError.topLevel(notJson(raw, reason));
  }
  const repeated = repeatedMember(raw);
  if (repeated) throw repeatedError(parsed, repeated);
  return parsed;
}

/** A member given twice, which JSON.parse would have settled silently by keeping the last: named as any field at fault is. */
function repeatedError(parsed: unknown, { path, name }: Repeated): ConfigError {
  const problem = "given twice, and JSON keeps only the last, so the other would be ignored; write it once";
  const inList = typeof path[0] === "number" ? 0 : path[0] === "rules" && typeof path[1] === "number" ? 1 : undefined;
  if (inList === undefined) return ConfigError.topLevel(`${show(name)} is ${problem}`, pathText([...path, name]));
  const index = path[inList] as number;
  const rule = ruleList(parsed)[index];
  const subfield = pathText([...path.slice(inList + 1), name]);
  return ConfigError.inRule(ruleRef(index, isObject(rule) ? fieldsOf(rule).get("name") : undefined), subfield, problem);
}

/** A rule as errors name it: its index, if it has one, and its name once that is valid. */
function ruleRef(index: number | undefined, claimed: unknown): RuleRef {
  return { ...(index === undefined ? {} : { index }), ...(typeof claimed === "string" && NAME.test(claimed) ? { name: claimed } : {}) };
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
  const at = ruleRef(index, claimed);
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
  const months = algorithm === "concurrency" ? undefined : calendarMonths(fields.get("period"), algorithm, at);
  const periodMs = algorithm === "concurrency" ? parseSlotTtl(fields, at) : months !== undefined ? months * LONGEST_MONTH_MS : parsePeriod(fields.get("period"), at);
  if (algorithm !== "concurrency" && given(fields, "slotTtl")) {
    fail(at, "slotTtl", `slotTtl applies to concurrency only; remove it, or set "algorithm": "concurrency"`);
  }
  const burst = parseBurst(fields.get("burst"), algorithm, limit, at);
  const delay = parseDelay(fields.get("delay"), algorithm, burst, at);
  const warmupMs = parseWarmup(fields.get("warmup"), algorithm, at);
  const capacity = capacityOf(algorithm, limit, burst);
  // A fixed window counts whole units, never scaled by its period: a monthly quota of 10 million is as exact as one of 10.
  if (algorithm !== "fixed-window") requireExactArithmetic(limit, capacity, periodMs, at);
  else if (limit > LARGEST_FIXED_LIMIT) fail(at, "limit", `expected at most ${LARGEST_FIXED_LIMIT} for "fixed-window" (2^52, so that its count and a charge on it add up exactly), got ${limit}`);
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
  const timeoutMs = given(fields, "timeout") ? parseDurationField(fields.get("timeout"), at, "timeout") : DEFAULT_TIMEOUT_MS;
  const ipv6Prefix = parseIpv6Prefix(fields.get("ipv6Prefix"), key, at);
  const newKeysPerSecond = given(fields, "newKeysPerSecond") ? parseCount(fields.get("newKeysPerSecond"), at, "newKeysPerSecond") : null;
  const dryRun = parseBoolean(fields.get("dryRun"), at, "dryRun");
  const blockMs = given(fields, "block") ? parseDurationField(fields.get("block"), at, "block") : null;
  const count = parseChoice(fields.get("count"), COUNTS, at, "count");
  const uncounted = count !== "all" ? uncountable(algorithm) : undefined;
  if (uncounted) fail(at, "count", uncounted);
  const responseCost = parseResponseCost(fields.get("responseCost"), algorithm, at);
  const denyResponse = parseDenyResponse(fields.get("denyResponse"), at);
  const rule: Rule = { name, match, key, algorithm, limit, periodMs, burst, buckets, cost, mode, syncMs, onError, timeoutMs, ipv6Prefix, newKeysPerSecond, dryRun, blockMs, count };
  if (delay !== undefined) rule.delay = delay;
  if (warmupMs !== undefined) rule.warmupMs = warmupMs;
  if (aggregate !== "none") rule.aggregate = aggregate;
  if (months !== undefined) rule.months = months;
  if (responseCost) rule.responseCost = responseCost;
  if (denyResponse) rule.denyResponse = denyResponse;
  const overrides = parseOverrides(fields.get("overrides"), fields, rule, at, (merged) => parseRule(merged, index, allowed));
  if (overrides) rule.overrides = overrides;
  return rule;
}

/**
 * Why a rule of `algorithm` cannot count by response (its `count`), saying what to do instead;
 * undefined when it can. Only the windowed algorithms give a unit back at the time it was taken.
 */
export function uncountable(algorithm: AlgorithmName): string | undefined {
  if (algorithm === "concurrency") return `a concurrency slot comes back once its response is sent, whatever its status, so there is nothing to give back; remove it`;
  const why = givesNothingBackLate(algorithm);
  return why && `"${algorithm}" cannot count by response: ${why}; use "sliding-window", "fixed-window" or "sliding-log"`;
}

/** Why a rule of `algorithm` cannot give back units once a request is over (a token bucket or gcra); undefined when it can. */
export function givesNothingBackLate(algorithm: AlgorithmName): string | undefined {
  if (algorithm !== "token-bucket" && algorithm !== "gcra") return undefined;
  return `a bucket keeps no history, so a unit given back once the response is known cannot be told from one its refill has restored since (one that refilled and was drained while a slow request was in flight would refill twice)`;
}

function parseName(value: unknown, at: RuleRef): string {
  const form = `1 to 64 characters from a-z, 0-9, "_" and "-", e.g. "api-per-key"`;
  if (value === undefined) fail(at, "name", `required: ${form}`);
  if (typeof value !== "string" || !NAME.test(value)) fail(at, "name", `expected ${form}, got ${show(value)}`);
  return value;
}

function parseLimit(value: unknown, at: RuleRef): number {
  if (value === undefined) fail(at, "limit", `required: a positive integer, e.g. 100`);
  return parseCount(value, at, "limit");
}

/**
 * A `period` in calendar months, `"<n>mo"` or `"<n>y"` (12 months each): how many months to a
 * window; undefined for any other period. Only a fixed window counts by the calendar: a month
 * has no one length for a sliding window or a bucket to spread its units over.
 */
function calendarMonths(value: unknown, algorithm: AlgorithmName, at: RuleRef): number | undefined {
  const match = typeof value === "string" ? /^(\d+)(mo|y)$/.exec(value) : null;
  if (!match) return undefined;
  if (algorithm !== "fixed-window") {
    const days = match[2] === "mo" ? 30 * Number(match[1]) : 365 * Number(match[1]);
    fail(at, "period", `${show(value)} is a calendar period, which only "fixed-window" counts by (a window from the 1st, UTC): months differ in length, so no other algorithm can spread its units over one; use "fixed-window", or a duration like "${days}d"`);
  }
  const months = Number(match[1]) * (match[2] === "y" ? 12 : 1);
  if (months < 1 || months > MAX_CALENDAR_MONTHS) fail(at, "period", `expected 1 to ${MAX_CALENDAR_MONTHS} months (${MAX_CALENDAR_MONTHS / 12} years) in a calendar period, got ${show(value)}`);
  return months;
}

/** The largest limit a fixed window takes: half of 2^53, so that its count and a charge on it add up exactly. */
const LARGEST_FIXED_LIMIT = 2 ** 52;
/** A calendar window's length at most, a month being 31 days: its `periodMs`, which bounds the waits it states. */
const LONGEST_MONTH_MS = 31 * 86_400_000;
/** Ten years: longer than any plan's quota; a year longer would be a typo more often than a plan. */
const MAX_CALENDAR_MONTHS = 120;

/** A calendar period as written back: years when the months make whole years. */
function formatMonths(months: number): string {
  return months % 12 === 0 ? `${months / 12}y` : `${months}mo`;
}

function parsePeriod(value: unknown, at: RuleRef): number {
  if (value === undefined) fail(at, "period", `required: a duration like "1m" or "10s", or a number of seconds`);
  return parseDurationField(value, at, "period");
}

/** A concurrency rule holds slots rather than counting over a period: `slotTtl` bounds a slot, and `period` means nothing. */
function parseSlotTtl(fields: Fields, at: RuleRef): number {
  if (given(fields, "period")) {
    fail(at, "period", `"concurrency" has no period: a slot is held until its response has been sent, or for slotTtl at most (default "1m"); remove period`);
  }
  return given(fields, "slotTtl") ? parseDurationField(fields.get("slotTtl"), at, "slotTtl") : DEFAULT_SLOT_TTL_MS;
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
