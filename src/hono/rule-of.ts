/** The rule a `rateLimit` applies to a request: the one it was given, or what its rule function returns for the request, each parsed once. */
import type { Context } from "hono";
import { describeRule, parseStandaloneRule } from "../config/rules";
import type { LimiterRule } from "../config/input";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";

/** A rule, or a function of the context choosing one per request (a plan's, say). */
export type RuleOption<C extends Context> = LimiterRule | ((c: C) => LimiterRule | Promise<LimiterRule>);

/**
 * How many distinct rules a rule function may return before the least used are parsed again: a
 * function that builds its rule afresh per request costs one JSON.stringify, not a parse.
 */
const PARSED_RULES = 256;

/**
 * The rule of each request. A rule given as it is is parsed now, so a bad one throws when the
 * middleware is made; one a function returns is parsed the first time it is seen (a bad one fails
 * that request), and `adopted` makes each the rule to apply (checking it against the middleware's
 * other options) once. A name stands for one rule: a function that
 * returns two different rules under one name would have one key's object counted under each in
 * turn, so the second throws, asking for a name of its own.
 */
export function ruleOf<C extends Context>(option: RuleOption<C>, adopted: (rule: Rule) => Rule): (c: C) => Rule | Promise<Rule> {
  if (typeof option !== "function") {
    const rule = adopted(parseStandaloneRule(option, { requests: true }));
    return () => rule;
  }
  const parsed = new LruTable<Rule>(PARSED_RULES, () => undefined);
  const described = new LruTable<Record<string, unknown>>(PARSED_RULES, () => undefined);
  return async (c) => {
    const input = await option(c);
    const text = JSON.stringify(input);
    const known = typeof text === "string" ? parsed.get(text) : undefined;
    if (known) return known;
    const rule = parseStandaloneRule(input, { requests: true });
    const description: Record<string, unknown> = { ...describeRule(rule) };
    const before = described.get(rule.name);
    const differ = before ? Object.keys({ ...before, ...description }).filter((field) => JSON.stringify(before[field]) !== JSON.stringify(description[field])) : [];
    if (before && differ.length > 0) {
      const how = differ.map((field) => `${field} ${JSON.stringify(before[field])} and ${JSON.stringify(description[field])}`).join(", ");
      throw new TypeError(`rateLimit: the rule function returned two different rules named "${rule.name}" (${how}); give each its own name, e.g. "${rule.name}-pro"`);
    }
    const applied = adopted(rule);
    described.set(rule.name, description);
    parsed.set(text, applied);
    return applied;
  };
}
