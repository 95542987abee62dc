/** The rule a `rateLimit` applies to a request: the one it was given, or what its rule function returns for the request, each parsed once. */
import type { Context } from "hono";
import { ConfigError } from "../config/errors";
import { parseStandaloneRule } from "../config/rules";
import type { RequestRule } from "../config/input";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";
import { claimKind, kindsTable } from "../limiter/kinds";

/** A rule, or a function of the context choosing one per request (a plan's, say). */
export type RuleOption<C extends Context> = RequestRule | ((c: C) => RequestRule | Promise<RequestRule>);

/**
 * How many distinct rules a rule function may return before the least used are parsed again: a
 * function that builds its rule afresh per request costs one JSON.stringify, not a parse.
 */
const PARSED_RULES = 256;

/**
 * The rule of each request. A rule given as it is is parsed now, so a bad one throws when the
 * middleware is made; one a function returns is parsed the first time it is seen (a bad one fails
 * that request: a ConfigError naming it). `adopted` makes each the rule to apply, once, told whether the middleware was
 * given it (`fixed`) or a function chose it. Rules of one name may differ (limits by plan under
 * one name): a key asked under two of them counts over from one to the other, as when a deploy
 * changes a rule. Not a concurrency rule and a rate rule: a key's object would take one's units
 * for the other's slots, and a slot released under the rate rule's state is lost, so the second
 * kind under a name throws.
 */
export function ruleOf<C extends Context>(option: RuleOption<C>, adopted: (rule: Rule, fixed: boolean) => Rule): (c: C) => Rule | Promise<Rule> {
  if (typeof option !== "function") {
    const rule = adopted(parseStandaloneRule(option, { requests: true }), true);
    return () => rule;
  }
  const parsed = new LruTable<Rule>(PARSED_RULES, () => undefined);
  const kinds = kindsTable();
  return async (c) => {
    const input = await option(c);
    const text = JSON.stringify(input);
    const known = typeof text === "string" ? parsed.get(text) : undefined;
    if (known) return known;
    const rule = adopted(parseStandaloneRule(input, { requests: true }), false);
    claimKind(kinds, rule, (problem) => ConfigError.inRule({ name: rule.name }, undefined, problem));
    if (typeof text === "string") parsed.set(text, rule);
    return rule;
  };
}
