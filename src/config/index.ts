/** The configuration of this isolate, validated once and again only when the raw bindings change. */
import type { Env } from "../env";
import { DEFAULT_HEADERS, HEADER_FORMS, type HeaderForm, type HeaderOptions } from "../http/rate-limit-headers";
import { parseIpList, type IpList } from "../routing/cidr";
import { ConfigError, show } from "./errors";
import { parseOrigin, type Origin } from "./origin";
import { parseConfig } from "./rules";
import type { Config } from "./types";

export interface Settings extends Config {
  origin: Origin;
  /** fast-mode keys tracked per isolate; undefined for the default */
  fastMaxKeys: number | undefined;
  /** the rate-limit header forms responses carry, from `RATE_LIMIT_HEADERS` and `LEGACY_HEADERS` */
  headers: HeaderOptions;
  /** `ALLOW_IPS` (never limited) and `DENY_IPS` (403 before anything else); null when unset */
  ips: IpLists;
}

export interface IpLists {
  allow: IpList | null;
  deny: IpList | null;
}

/** The bindings besides the rules that the settings are read from, compared as they are. */
const VARS = ["ORIGIN_URL", "FAST_MAX_KEYS", "RATE_LIMIT_HEADERS", "LEGACY_HEADERS", "ALLOW_IPS", "DENY_IPS"] as const;

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

function parse(env: Env): Settings | ConfigError {
  try {
    return {
      ...parseConfig(env.RATE_LIMIT_RULES),
      origin: parseOrigin(env.ORIGIN_URL),
      fastMaxKeys: parseMaxKeys(env.FAST_MAX_KEYS),
      headers: { form: parseHeaderForm(env.RATE_LIMIT_HEADERS), legacy: parseLegacy(env.LEGACY_HEADERS) },
      ips: { allow: parseIpVar(env.ALLOW_IPS, "ALLOW_IPS"), deny: parseIpVar(env.DENY_IPS, "DENY_IPS") },
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
function parseLegacy(raw: unknown): boolean {
  if (raw === undefined || raw === "") return DEFAULT_HEADERS.legacy;
  if (raw === true || raw === "true") return true;
  if (raw === false || raw === "false") return false;
  throw ConfigError.topLevel(`expected "true" (the default) or "false", got ${show(raw)}`, "LEGACY_HEADERS");
}

/** A comma-separated list of addresses and CIDRs; unset or blank is no list. */
function parseIpVar(raw: unknown, name: "ALLOW_IPS" | "DENY_IPS"): IpList | null {
  if (raw === undefined || (typeof raw === "string" && raw.trim() === "")) return null;
  return parseIpList(raw as string, { field: name });
}

function textOf(raw: unknown): string {
  return typeof raw === "string" ? raw : JSON.stringify(raw) ?? "";
}
