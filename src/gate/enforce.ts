/** These rules, this request → a verdict: every applicable rule decided concurrently, all-or-nothing. */
import { largestCost, type Decision } from "../algorithms";
import { ruleForKey } from "../config/overrides";
import type { Rule } from "../config/types";
import { invalidRequest } from "../http/problem";
import { asReleased, cachedDenial, countDecision, countRefusal, countUnlimited, decide, giveBack, locatedAt, ownerOf, type Ask, type LimiterContext } from "../limiter";
import { waitHold } from "../limiter/hold";
import { releaseOf, type Release } from "../limiter/release";
import { settleOf, type Settle } from "../limiter/settle";
import { hostOf, matchingRules } from "../routing/match";
import { buildKey, clientAddress, requestCost } from "../routing/key";

/** One applicable rule and what it decided for the request. */
export interface Enforced {
  rule: Rule;
  decision: Decision;
}

export interface Verdict {
  allowed: boolean;
  /**
   * every applicable rule's decision, in rule order; when the isolate already knew a rule denies
   * the request, only the rules that knew it: the others were not asked
   */
  entries: Enforced[];
  /** the client went away while the request was held (gcra's `delay`): not allowed, every rule's units given back */
  gone?: true;
  /** an allowed request's concurrency slots: call once the request is over (see ../limiter/release) */
  release?: Release;
  /** when a rule counts by response (its `count`) or reads its cost from it (`responseCost`): call with the response's status and headers once they are known (see ../limiter/settle) */
  settle?: Settle;
}

/**
 * Evaluates every rule whose `match` fits `url` (the request's, parsed once by the caller). The request is allowed only if every rule allows it;
 * when one denies, the units the others took are given back, so a client blocked by one rule does
 * not burn its quota under another. A request that this isolate already knows one rule denies (a
 * cached denial) is denied at once: no rule asks its object, so a client over one limit costs
 * nothing under the others. A dry-run rule decides and counts as if it were enforced (its units
 * are given back with the others' when an enforced rule denies), but its denial denies nothing.
 * An allowed request that a rule holds (gcra's `delay`) resolves only once the hold is over; if
 * its client goes away first (`request.signal`), every rule's units are given back and it is `gone`.
 * Throws a 400 HttpProblem when the request's input is invalid for a rule (a malformed cost
 * header), before any rule consumes anything.
 */
export async function enforce(request: Request, url: URL, rules: readonly Rule[], requested: LimiterContext): Promise<Verdict> {
  const context = locatedAt(requested, request);
  const ip = clientAddress(request);
  const applicable = matchingRules(rules, { method: request.method, path: url.pathname, host: hostOf(url), ip });
  const now = Date.now();
  const unlimited: Rule[] = [];
  const parts = applicable.flatMap((rule) => partsOf(rule, request, context, unlimited));
  // Counted once every rule has read its cost: a request another rule refuses with a 400 was let through by none.
  for (const rule of unlimited) countUnlimited(rule);
  // Rules that admit any key are asked first: a request one of them already denies spends no
  // other rule's allowance of new keys (newKeysPerSecond), which would push new clients into #overflow.
  const open = await Promise.all(parts.map((p) => (p.rule.newKeysPerSecond === null ? named(p, now) : undefined)));
  const openAsks = open.filter((a): a is Ask => a !== undefined);
  const early = knownDenials(openAsks, context, now);
  if (early.length > 0) return counted(false, early, context);
  const allOpen = openAsks.length === parts.length;
  const asks = allOpen ? openAsks : await Promise.all(parts.map((p, i) => open[i] ?? named(p, now)));
  const known = allOpen ? [] : knownDenials(asks.filter((a) => a.rule.newKeysPerSecond !== null), context, now);
  if (known.length > 0) return counted(false, known, context);
  // A cost an enforced rule can never grant denies the request whatever the others say: they are not asked.
  const certain = asks.filter((a) => !a.rule.dryRun && a.cost > largestCost(a.rule));
  if (certain.length > 0) return counted(false, await Promise.all(certain.map(async (a) => ({ ask: a, decision: (await decide(a, context)).decision }))), context);
  const taken = await Promise.all(asks.map((a) => decide(a, context)));
  // A dry-run rule's denial never denies: the request goes on as if the rule were not there.
  const allowed = taken.every((t, i) => t.decision.allowed || asks[i]!.rule.dryRun);
  const admitted = asks.map((a, i) => ({ ask: a, taken: taken[i]! }));
  if (!allowed) admitted.forEach(({ ask, taken: t }) => void giveBack(ask, t, context));
  const verdict = counted(allowed, asks.map((a, i) => ({ ask: a, decision: taken[i]!.decision })), context);
  if (!allowed) return verdict;
  // Slots are renewed from the admission: a held request is in flight, and its hold may outlast
  // slotTtl (renewed only once the hold was over, its slot ran out and another request took it).
  const slots = releaseOf(admitted, context);
  // Held requests were counted when admitted; one whose client leaves while held never happened.
  // Its slots come back through their release, which finds them where their renewals moved them.
  if (!(await waitHold(verdict.entries, request.signal))) {
    for (const { ask, taken: t } of admitted) if (ask.rule.algorithm !== "concurrency") void giveBack(ask, t, context);
    if (slots.release) context.waitUntil?.(slots.release());
    return { ...verdict, allowed: false, gone: true };
  }
  const released = verdict.entries.some((e) => e.decision.holdMs)
    ? { ...verdict, entries: await Promise.all(verdict.entries.map(async (e, i) => ({ rule: e.rule, decision: await asReleased(asks[i]!, e.decision, context) }))) }
    : verdict;
  return { ...released, ...slots, ...settleOf(admitted, context) };
}

/**
 * A rule's key and cost for the request (see {@link costOf}); none when the rule sits the request
 * out (a malformed cost under a dry-run rule, a key its override leaves unlimited: that rule is
 * added to `unlimited`).
 */
function partsOf(rule: Rule, request: Request, context: LimiterContext, unlimited: Rule[]): Omit<Ask, "objectName">[] {
  const key = buildKey(rule, request);
  if (ruleForKey(rule, key).unlimited) {
    unlimited.push(rule);
    return [];
  }
  const cost = costOf({ rule, key }, request, context);
  return cost === undefined ? [] : [{ rule, key, cost }];
}

/**
 * The units the request costs under the rule. A malformed cost is the rule's refusal, counted and
 * logged as one (see `countRefusal`): a 400 HttpProblem, thrown before any rule spends anything;
 * under a dry-run rule, which never refuses a request, its would-be refusal, and the rule sits the
 * request out: undefined.
 */
export function costOf(ask: Pick<Ask, "rule" | "key">, request: Request, context: LimiterContext): number | undefined {
  const { rule } = ask;
  const cost = requestCost(rule.cost, request);
  if (!("error" in cost)) return cost.units;
  countRefusal(ask, context);
  if (rule.dryRun) return undefined;
  throw invalidRequest(`rule "${rule.name}": ${cost.error}`);
}

/** The ask with the object that owns its key, under the key's override if it has one: under a rule's newKeysPerSecond, naming a new key spends the rule's allowance. */
async function named(parts: Omit<Ask, "objectName">, now: number): Promise<Ask> {
  return { ...parts, ...(await ownerOf(parts.rule, parts.key, now)) };
}

interface Asked {
  ask: Ask;
  decision: Decision;
}

/** The enforced rules this isolate already knows deny the request, from its cached denials: no call needed. */
function knownDenials(asks: readonly Ask[], context: LimiterContext, now: number): Asked[] {
  const known: Asked[] = [];
  for (const a of asks) {
    const decision = a.rule.dryRun ? undefined : cachedDenial(a, context, now);
    if (decision) known.push({ ask: a, decision });
  }
  return known;
}

function counted(allowed: boolean, asked: readonly Asked[], context: LimiterContext): Verdict {
  for (const { ask, decision } of asked) countDecision(ask, decision, context);
  return { allowed, entries: asked.map(({ ask, decision }) => ({ rule: ask.rule, decision })) };
}
