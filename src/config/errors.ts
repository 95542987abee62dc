/** The one error configuration parsing throws: it names the rule and the field at fault and says what to write. */

/**
 * A rule being parsed: its position in the list (none for a rule given on its own, as the library's
 * `limiter(namespace, rule)` takes one), and its name once that is known to be valid.
 */
export interface RuleRef {
  readonly index?: number;
  readonly name?: string;
}

/**
 * A problem in `RATE_LIMIT_RULES`. The Worker answers 500 with the message as the detail.
 *
 * @example
 * // rules[1] ("login").period: expected a duration like "10s" (…), got "ten"
 * ConfigError.inRule({ index: 1, name: "login" }, "period", `expected a duration like "10s" (…), got "ten"`);
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";

  private constructor(
    /** path of the field at fault: `rules[1].period`, `rules`, or `RATE_LIMIT_RULES` */
    readonly field: string,
    /** the rule's name when it has a valid one, else its index; null for problems outside any rule */
    readonly rule: string | number | null,
    /** what is wrong and what to write instead, without the location */
    readonly problem: string,
    location: string,
  ) {
    super(`${location}: ${problem}`);
  }

  /** A problem with the binding as a whole, or with its `rules` list. */
  static topLevel(problem: string, field = "RATE_LIMIT_RULES"): ConfigError {
    return new ConfigError(field, null, problem, field);
  }

  /** A problem inside one rule; `subfield` is a path such as `period`, `match.path` or `key[1]`. */
  static inRule(rule: RuleRef, subfield: string | undefined, problem: string): ConfigError {
    const base = rule.index === undefined ? "rule" : `rules[${rule.index}]`;
    const tail = subfield === undefined ? "" : subfield.startsWith("[") ? subfield : `.${subfield}`;
    const label = rule.name === undefined ? base : `${base} (${JSON.stringify(rule.name)})`;
    return new ConfigError(base + tail, rule.name ?? rule.index ?? null, problem, label + tail);
  }
}

/** Renders a configuration value for an error message: short, and unambiguous about its type. */
export function show(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.length === 0 ? "an empty array" : "an array";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
    case "number":
    case "boolean":
      return String(value);
    case "undefined":
      return "nothing";
    case "object":
      return "an object";
    default:
      return `a ${typeof value}`;
  }
}
