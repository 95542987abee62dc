/** The configuration of this isolate, validated once and again only when the raw bindings change. */
import type { Env } from "../env";
import { ConfigError } from "./errors";
import { parseOrigin, type Origin } from "./origin";
import { parseConfig } from "./rules";
import type { Config } from "./types";

export interface Settings extends Config {
  origin: Origin;
  /** fast-mode keys tracked per isolate; undefined for the default */
  fastMaxKeys: number | undefined;
}

let cached:
  | { rules: unknown; origin: unknown; maxKeys: unknown; rulesText: string; result: Settings | ConfigError }
  | undefined;

/**
 * The validated settings for these bindings. Parsing happens once per isolate; a later call with
 * the same raw values (compared by identity, then by content) reuses the result, errors included.
 * Throws the ConfigError that names the rule and field at fault.
 */
export function loadSettings(env: Env): Settings {
  const rules = env.RATE_LIMIT_RULES;
  const same =
    cached !== undefined &&
    cached.origin === env.ORIGIN_URL &&
    cached.maxKeys === env.FAST_MAX_KEYS &&
    (cached.rules === rules || cached.rulesText === textOf(rules));
  if (!same) cached = { rules, origin: env.ORIGIN_URL, maxKeys: env.FAST_MAX_KEYS, rulesText: textOf(rules), result: parse(env) };
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

function textOf(raw: unknown): string {
  return typeof raw === "string" ? raw : JSON.stringify(raw) ?? "";
}
