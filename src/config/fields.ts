/** The field readers every part of a rule's parsing shares: one way to read a count, a choice, a duration, and one way to fail. */
import { parseDuration } from "./duration";
import { ConfigError, show, type RuleRef } from "./errors";

export type Fields = Map<string, unknown>;
export type Choices<T extends string> = readonly [T, ...T[]];

/** RFC 9110 token: HTTP methods, header names and (RFC 6265) cookie names are all tokens. */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function parseChoice<T extends string>(value: unknown, choices: Choices<T>, at: RuleRef, field: string): T {
  if (value === undefined) return choices[0];
  const choice = choices.find((candidate) => candidate === value);
  if (choice === undefined) {
    const allowed = choices.map((c) => JSON.stringify(c)).join(" or ");
    fail(at, field, `expected ${allowed} (default ${JSON.stringify(choices[0])}), got ${show(value)}`);
  }
  return choice;
}

export function parseCount(value: unknown, at: RuleRef, field: string): number {
  if (!isCount(value)) {
    fail(at, field, `expected a positive integer (at most ${Number.MAX_SAFE_INTEGER}), got ${show(value)}`);
  }
  return value;
}

export function parseBoolean(value: unknown, at: RuleRef, field: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") fail(at, field, `expected true or false (default false), got ${show(value)}`);
  return value;
}

export function parseDurationField(value: unknown, at: RuleRef, field: string): number {
  const parsed = parseDuration(value);
  if (!parsed.ok) fail(at, field, parsed.problem);
  return parsed.ms;
}

export function rejectUnknown(fields: Fields, allowed: readonly string[], at: RuleRef, parent: string | undefined): void {
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

/** Own enumerable fields only, so nothing is ever read from a prototype. */
export function fieldsOf(value: object): Fields {
  return new Map(Object.entries(value));
}

/** Whether the field has a value: one given as undefined (from code, a rule built from options) is left out, as JSON and TOML leave it. */
export function given(fields: Fields, field: string): boolean {
  return fields.get(field) !== undefined;
}

export function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

export function fail(at: RuleRef, field: string | undefined, problem: string): never {
  throw ConfigError.inRule(at, field, problem);
}

/**
 * The one of `fields` that `name` is a slip of (a letter missed, added, changed or in another case; two in a name of
 * five letters or more), if any: a name that close to a field is a typo, safe to name in a message where other
 * unknown names are not (an override's may be an API key).
 */
export function slipOf(name: string, fields: readonly string[]): string | undefined {
  const typed = name.toLowerCase();
  return fields.find((field) => editDistance(typed, field.toLowerCase()) <= (field.length >= 5 ? 2 : 1));
}

/** Levenshtein distance: the fewest letters inserted, deleted or replaced to turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}
