/** Decides a request against every rule that applies to it: concurrently, all-or-nothing. */
import type { Decision } from "../algorithms";
import type { Rule } from "../config/types";
import type { Env } from "../env";
import { cachedFastDenial, decideFast, peersOf, refundFast, type FastContext } from "../fast";
import { invalidRequest } from "../http/problem";
import { metrics } from "../metrics/metrics";
import { matchingRules } from "../routing/match";
import { buildKey, durableObjectName, requestCost } from "../routing/key";
import { cachedStrictDenial, decideStrict, refundStrict, type StrictDecision } from "../strict";
import { admitKey } from "./new-keys";
import { onErrorDecision } from "./on-error";

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
}

interface Ask {
  rule: Rule;
  objectName: string;
  cost: number;
}

/** A decision, and for a strict one that took units, when the object counted them. */
type Taken = StrictDecision;

/**
 * Evaluates every rule whose `match` fits `url` (the request's, parsed once by the caller). The request is allowed only if every rule allows it;
 * when one denies, the units the others took are given back, so a client blocked by one rule does
 * not burn its quota under another. A request that this isolate already knows one rule denies (a
 * cached denial) is denied at once: no rule asks its object, so a client over one limit costs
 * nothing under the others. Throws a 400 HttpProblem when the request's input is invalid for a
 * rule (a malformed cost header), before any rule consumes anything.
 */
export async function enforce(
  request: Request,
  url: URL,
  rules: readonly Rule[],
  env: Env,
  ctx: ExecutionContext,
): Promise<Verdict> {
  const applicable = matchingRules(rules, { method: request.method, path: url.pathname, host: url.host });
  const now = Date.now();
  const asks = await Promise.all(applicable.map((rule) => ask(rule, request, now)));
  const fast: FastContext = { namespace: env.LIMITER, waitUntil: (promise) => ctx.waitUntil(promise) };
  const known = knownDenials(asks, fast, now);
  if (known.length > 0) return counted({ allowed: false, entries: known });
  const taken = await Promise.all(asks.map((a) => take(a, fast)));
  const allowed = taken.every((t) => t.decision.allowed);
  if (!allowed) asks.forEach((a, i) => giveBack(a, taken[i]!, fast));
  return counted({ allowed, entries: asks.map((a, i) => ({ rule: a.rule, decision: taken[i]!.decision })) });
}

async function ask(rule: Rule, request: Request, now: number): Promise<Ask> {
  const cost = requestCost(rule.cost, request);
  if ("error" in cost) throw invalidRequest(`rule "${rule.name}": ${cost.error}`);
  const objectName = await durableObjectName(rule.name, admitKey(rule, buildKey(rule, request), now));
  return { rule, objectName, cost: cost.units };
}

/** The rules this isolate already knows deny the request, from its cached denials: no call needed. */
function knownDenials(asks: readonly Ask[], fast: FastContext, now: number): Enforced[] {
  const known: Enforced[] = [];
  for (const { rule, objectName, cost } of asks) {
    const decision = rule.mode === "fast" ? cachedFastDenial(fast, rule, objectName, cost, now) : cachedStrictDenial(objectName, cost, now);
    if (decision) known.push({ rule, decision });
  }
  return known;
}

function counted(verdict: Verdict): Verdict {
  for (const { rule, decision } of verdict.entries) {
    metrics.count("floodgate_decisions_total", { rule: rule.name, decision: decision.allowed ? "allowed" : "denied" });
  }
  return verdict;
}

/** One rule's decision by its mode; when the object fails or is too slow, by its onError policy. */
async function take(a: Ask, fast: FastContext): Promise<Taken> {
  try {
    if (a.rule.mode === "fast") return { decision: await decideFast(fast, a.rule, a.objectName, a.cost) };
    return await decideStrict(fast.namespace, a.objectName, a.rule, a.cost, fast.waitUntil);
  } catch (error) {
    countError("durable_object")(error);
    const peers = a.rule.mode === "fast" ? peersOf(a.objectName) : 1;
    return { decision: onErrorDecision(a.rule, a.objectName, a.cost, peers, Date.now()) };
  }
}

/** Returns what an allowed rule took for a request that another rule denied. */
function giveBack(a: Ask, { decision, countedAt }: Taken, fast: FastContext): void {
  if (!decision.allowed || decision.reason === "error") return;
  if (countedAt === undefined) return refundFast(a.objectName, a.cost);
  fast.waitUntil(refundStrict(fast.namespace, a.objectName, a.rule, a.cost, countedAt).catch(countError("refund")));
}

function countError(kind: string): (error: unknown) => void {
  return (error) => {
    metrics.count("floodgate_errors_total", { kind });
    console.error(`floodgate: ${kind} failed: ${error instanceof Error ? error.message : String(error)}`);
  };
}
