/** One name, one kind: a concurrency rule and a rate rule never share a name, since a key's object cannot count slots and units at once. */
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";

/** Names remembered per table; past it the least used is forgotten (code naming rules per request, say). */
const NAMES = 10_000;

/** Which names were given a concurrency rule (true) or a rate rule (false). */
export type Kinds = LruTable<boolean>;

export function kindsTable(): Kinds {
  return new LruTable<boolean>(NAMES, () => undefined);
}

/**
 * Remembers the rule's kind under its name, or throws `fail`'s error for the problem when the name
 * had the other kind: one's units would be taken for the other's slots, and a slot released under
 * the rate rule's state lost.
 */
export function claimKind(kinds: Kinds, rule: Rule, fail: (problem: string) => Error): void {
  const concurrency = rule.algorithm === "concurrency";
  if ((kinds.get(rule.name) ?? concurrency) !== concurrency) {
    throw fail(`a concurrency rule and a rate rule are both named "${rule.name}"; a key's object cannot count slots and units at once: give each its own name`);
  }
  kinds.set(rule.name, concurrency);
}
