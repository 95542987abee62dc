/** The configuration of this isolate, validated once and again only when the raw bindings change. */
import type { Env } from "../env";
import { ConfigError } from "./errors";
import { parseOrigin, type Origin } from "./origin";
import { parseConfig } from "./rules";
import type { Config } from "./types";

export interface Settings extends Config {
  origin: Origin;
}

let cached: { rules: unknown; origin: unknown; rulesText: string; result: Settings | ConfigError } | undefined;

/**
 * The validated settings for these bindings. Parsing happens once per isolate; a later call with
 * the same raw values (compared by identity, then by content) reuses the result, errors included.
 * Throws the ConfigError that names the rule and field at fault.
 */
export function loadSettings(env: Env): Settings {
  const rules = env.RATE_LIMIT_RULES;
  if (!cached || cached.origin !== env.ORIGIN_URL || (cached.rules !== rules && cached.rulesText !== textOf(rules))) {
    cached = { rules, origin: env.ORIGIN_URL, rulesText: textOf(rules), result: parse(env) };
  }
  if (cached.result instanceof ConfigError) throw cached.result;
  return cached.result;
}

function parse(env: Env): Settings | ConfigError {
  try {
    return { ...parseConfig(env.RATE_LIMIT_RULES), origin: parseOrigin(env.ORIGIN_URL) };
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

function textOf(raw: unknown): string {
  return typeof raw === "string" ? raw : JSON.stringify(raw) ?? "";
}
