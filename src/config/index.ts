/** The configuration of this isolate, validated once and again only when the raw bindings change. */
import { isNamespace } from "../durable-object/stub";
import type { Env } from "../env";
import { DEFAULT_HEADERS, HEADER_FORMS, type HeaderForm, type HeaderOptions } from "../http/rate-limit-headers";
import type { AnalyticsSettings } from "../metrics/analytics";
import { parseIpList, type IpList } from "../routing/cidr";
import { ConfigError, show } from "./errors";
import { parseOrigin, type Origin } from "./origin";
import { parseConfig } from "./rules";
import type { Config } from "./types";

export interface Settings extends Config {
  /**
   * `ORIGIN_URL`, or the error that names what is wrong with it: only the proxy forwards, so the
   * service binding and the admin API work without one (the proxy answers the error's 500)
   */
  origin: Origin | ConfigError;
  /** fast-mode keys tracked per isolate; undefined for the default */
  fastMaxKeys: number | undefined;
  /** the rate-limit header forms responses carry, from `RATE_LIMIT_HEADERS` and `LEGACY_HEADERS` */
  headers: HeaderOptions;
  /** `ALLOW_IPS` (never limited) and `DENY_IPS` (403 before anything else); null when unset */
  ips: IpLists;
  /** the `ANALYTICS` dataset with `ANALYTICS_SAMPLE` and `ANALYTICS_HASH_KEY`; absent when not bound */
  analytics?: AnalyticsSettings;
  /** `ANALYTICS_HASH_KEY`, which keys the hashes in logs too */
  hashKey?: string;
  /** what is set but has no effect, each naming its var: logged, never answered with a 500 (traffic does not depend on it) */
  warnings: readonly ConfigError[];
}

export interface IpLists {
  allow: IpList | null;
  deny: IpList | null;
}

/** The bindings besides the rules that the settings are read from, compared as they are. */
const VARS = [
  "ORIGIN_URL", "FAST_MAX_KEYS", "RATE_LIMIT_HEADERS", "LEGACY_HEADERS", "ALLOW_IPS", "DENY_IPS", "ANALYTICS", "ANALYTICS_SAMPLE", "ANALYTICS_HASH_KEY", "DRY_RUN",
] as const;

let cached: { rules: unknown; vars: unknown[]; rulesText: string; result: Settings | ConfigError } | undefined;

/**
 * The validated settings for these bindings. Parsing happens once per isolate; a later call with
 * the same raw values (compared by identity, then by content) reuses the result, errors included.
 * Throws the ConfigError that names the rule and field at fault.
 */
export function loadSettings(env: Env): Settings {
  const rules = env.RATE_LIMIT_RULES;
  const same =
    cached !== undefined &&
    VARS.every((name, i) => cached!.vars[i] === env[name]) &&
    (cached.rules === rules || cached.rulesText === textOf(rules));
  if (!same) cached = { rules, vars: VARS.map((name) => env[name]), rulesText: textOf(rules), result: parse(env) };
  const { result } = cached!;
  if (result instanceof ConfigError) throw result;
  return result;
}

/**
 * Throws the ConfigError naming `LIMITER` when the Worker has no RateLimiter binding (an environment
 * that does not repeat it, say): every decision goes through it, and without it the proxy and the
 * service binding failed inside, and a fast rule denied as if its object were down. Apart from
 * {@link loadSettings}, which `npm run deploy` runs where no binding exists.
 */
export function requireLimiter(env: Env): void {
  if (!isNamespace(env.LIMITER)) {
    throw ConfigError.topLevel(`expected the RateLimiter Durable Object binding: add [[durable_objects.bindings]] with name = "LIMITER" and class_name = "RateLimiter" (and its new_sqlite_classes migration) to wrangler.toml, got ${show(env.LIMITER)}`, "LIMITER");
  }
}

function parse(env: Env): Settings | ConfigError {
  try {
    const { rules } = parseConfig(env.RATE_LIMIT_RULES);
    return {
      // The whole rule set in shadow mode, to roll floodgate out in front of an API: each rule counts, none denies.
      rules: parseFlag(env.DRY_RUN, "DRY_RUN", false) ? rules.map((rule) => ({ ...rule, dryRun: true })) : rules,
      origin: originOrError(env.ORIGIN_URL),
      fastMaxKeys: parseMaxKeys(env.FAST_MAX_KEYS),
      headers: { form: parseHeaderForm(env.RATE_LIMIT_HEADERS), legacy: parseFlag(env.LEGACY_HEADERS, "LEGACY_HEADERS", DEFAULT_HEADERS.legacy) },
      ips: { allow: parseIpVar(env.ALLOW_IPS, "ALLOW_IPS"), deny: parseIpVar(env.DENY_IPS, "DENY_IPS") },
      ...parseAnalytics(env),
    };
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

function parseMaxKeys(raw: unknown): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const value = typeof raw === "number" ? raw : typeof raw === "string" && /^[0-9]+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw ConfigError.topLevel(`expected a positive whole number of keys like "20000", got ${JSON.stringify(raw)}`, "FAST_MAX_KEYS");
  }
  return value;
}

function parseHeaderForm(raw: unknown): HeaderForm {
  if (raw === undefined || raw === "") return DEFAULT_HEADERS.form;
  if (HEADER_FORMS.includes(raw as HeaderForm)) return raw as HeaderForm;
  const choices = HEADER_FORMS.map((form) => JSON.stringify(form));
  throw ConfigError.topLevel(
    `expected ${choices.slice(0, -1).join(", ")} or ${choices.at(-1)} (${JSON.stringify(DEFAULT_HEADERS.form)} when unset), got ${show(raw)}`,
    "RATE_LIMIT_HEADERS",
  );
}

// wrangler passes a TOML boolean as a boolean, and a string as it is.
function parseFlag(raw: unknown, name: string, unset: boolean): boolean {
  if (raw === undefined || raw === "") return unset;
  if (raw === true || raw === "true") return true;
  if (raw === false || raw === "false") return false;
  throw ConfigError.topLevel(`expected ${unset ? `"true" (the default) or "false"` : `"true" or "false" (the default)`}, got ${show(raw)}`, name);
}

/** `ANALYTICS_HASH_KEY` when it is set: log lines' key hashes are keyed with it. */
export function hashKeyOf(env: Env): string | undefined {
  const { ANALYTICS_HASH_KEY: hashKey } = env;
  return typeof hashKey === "string" && hashKey !== "" ? hashKey : undefined;
}

/** The dataset with its sampling and hash key, all checked: a bound dataset is never silently left unused, nor a sampling without one. */
function parseAnalytics(env: Env): { analytics?: AnalyticsSettings; hashKey?: string; warnings: ConfigError[] } {
  const { ANALYTICS: dataset, ANALYTICS_SAMPLE: rawSample, ANALYTICS_HASH_KEY: hashKey } = env;
  const sample = rawSample === undefined || rawSample === "" ? 1 : typeof rawSample === "number" ? rawSample : /^\s*[0-9.]+\s*$/.test(String(rawSample)) ? Number(rawSample) : NaN;
  if (!(sample >= 0 && sample <= 1)) {
    throw ConfigError.topLevel(`expected the share of decisions to record, a number from 0 to 1 like "0.1" (default 1: all), got ${show(rawSample)}`, "ANALYTICS_SAMPLE");
  }
  if (dataset === undefined) {
    const warnings = rawSample === undefined || rawSample === "" ? [] : [UNBOUND_SAMPLE(rawSample)];
    return hashKeyOf(env) ? { hashKey: hashKeyOf(env)!, warnings } : { warnings };
  }
  if (typeof dataset?.writeDataPoint !== "function") throw ConfigError.topLevel("expected a Workers Analytics Engine dataset binding ([[analytics_engine_datasets]] in wrangler.toml)", "ANALYTICS");
  if (typeof hashKey !== "string" || hashKey === "") {
    throw ConfigError.topLevel("required while ANALYTICS is bound: the secret keys are hashed with before they are written; run `npx wrangler secret put ANALYTICS_HASH_KEY`", "ANALYTICS_HASH_KEY");
  }
  return { analytics: { dataset, sample, hashKey }, hashKey, warnings: [] };
}

// Not an error: the decisions are what matters, and a missing dataset loses only their record.
const UNBOUND_SAMPLE = (raw: unknown) =>
  ConfigError.topLevel(`set to ${show(raw)} while no ANALYTICS dataset is bound, so no decision is recorded: add [[analytics_engine_datasets]] with binding = "ANALYTICS" to wrangler.toml, or remove ANALYTICS_SAMPLE`, "ANALYTICS_SAMPLE");

/** ORIGIN_URL parsed, or the error that names what is wrong with it, for the proxy to answer. */
function originOrError(raw: unknown): Origin | ConfigError {
  try {
    return parseOrigin(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

/**
 * `DENY_IPS` alone, for when the rest of the configuration is invalid: an address it lists is still
 * refused before anything else. Null when it lists none, or is itself invalid (then the
 * configuration error is what every request gets).
 */
export function denyListOnly(env: Env): IpList | null {
  try {
    return parseIpVar(env.DENY_IPS, "DENY_IPS");
  } catch {
    return null;
  }
}

/** A comma-separated list of addresses and CIDRs, or an array of them, named `name` in errors; unset or blank is no list. */
export function parseIpVar(raw: unknown, name: string): IpList | null {
  if (raw === undefined || (typeof raw === "string" && raw.trim() === "")) return null;
  return parseIpList(raw as string, { field: name });
}

function textOf(raw: unknown): string {
  return typeof raw === "string" ? raw : JSON.stringify(raw) ?? "";
}
