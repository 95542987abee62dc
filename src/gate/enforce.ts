/** Decides a request against every rule that applies to it: concurrently, all-or-nothing. */
import type { Decision } from "../algorithms";
import type { Rule } from "../config/types";
import type { Env } from "../env";
import { invalidRequest } from "../http/problem";
import { metrics } from "../metrics/metrics";
import { matchingRules } from "../routing/match";
import { buildKey, durableObjectName, requestCost } from "../routing/key";
import { decideStrict, refundStrict } from "../strict";

/** One applicable rule and what it decided for the request. */
export interface Enforced {
  rule: Rule;
  decision: Decision;
}

export interface Verdict {
  allowed: boolean;
  /** every applicable rule's decision, in rule order */
  entries: Enforced[];
}

interface Ask {
  rule: Rule;
  objectName: string;
  cost: number;
}

/**
 * Evaluates every rule whose `match` fits. The request is allowed only if every rule allows it;
 * when one denies, the units the others took are given back, so a client blocked by one rule does
 * not burn its quota under another. Throws a 400 HttpProblem when the request's input is invalid
 * for a rule (a malformed cost header), before any rule consumes anything.
 */
export async function enforce(request: Request, rules: readonly Rule[], env: Env, ctx: ExecutionContext): Promise<Verdict> {
  const url = new URL(request.url);
  const applicable = matchingRules(rules, { method: request.method, path: url.pathname, host: url.host });
  const asks = await Promise.all(applicable.map((rule) => ask(rule, request)));
  const waitUntil = (promise: Promise<unknown>) => ctx.waitUntil(promise);
  const decided = await Promise.all(
    asks.map(async (a) => {
      try {
        return await decideStrict(env.LIMITER, a.objectName, a.rule, a.cost, waitUntil);
      } catch (error) {
        return { decision: failOpen(a.rule, error), countedAt: 0 };
      }
    }),
  );
  const allowed = decided.every((d) => d.decision.allowed);
  const entries = asks.map((a, i) => ({ rule: a.rule, decision: decided[i]!.decision }));
  for (const { rule, decision } of entries) {
    metrics.count("floodgate_decisions_total", { rule: rule.name, decision: decision.allowed ? "allowed" : "denied" });
  }
  if (!allowed) {
    asks.forEach((a, i) => {
      const { decision, countedAt } = decided[i]!;
      if (decision.allowed && decision.reason !== "error") {
        ctx.waitUntil(refundStrict(env.LIMITER, a.objectName, a.rule, a.cost, countedAt).catch(countError("refund")));
      }
    });
  }
  return { allowed, entries };
}

async function ask(rule: Rule, request: Request): Promise<Ask> {
  const cost = requestCost(rule.cost, request);
  if ("error" in cost) throw invalidRequest(`rule "${rule.name}": ${cost.error}`);
  const objectName = await durableObjectName(rule.name, buildKey(rule.key, request));
  return { rule, objectName, cost: cost.units };
}

/** A Durable Object that cannot answer must not take the API down: the rule lets the request through. */
function failOpen(rule: Rule, error: unknown): Decision {
  countError("durable_object")(error);
  return { allowed: true, limit: rule.limit, remaining: rule.limit, resetAt: Date.now(), retryAfter: 0, reason: "error" };
}

function countError(kind: string): (error: unknown) => void {
  return (error) => {
    metrics.count("floodgate_errors_total", { kind });
    console.error(`floodgate: ${kind} failed: ${error instanceof Error ? error.message : String(error)}`);
  };
}
