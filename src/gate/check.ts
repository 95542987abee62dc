/** The proxy's decision without the proxying: the verdict as headers to send, and the answer to send instead when denied. */
import type { HeaderOptions } from "../http/rate-limit-headers";
import { longestWait, mostRestrictive, rateLimitHeaders } from "../http/rate-limit-headers";
import { HttpProblem, rateLimited } from "../http/problem";
import type { Rule } from "../config/types";
import type { LimiterContext } from "../limiter";
import { enforce, type Enforced } from "./enforce";

/** What `check` says of a request: the binding's `check`, the library's `createGate`, and the proxy all use it. */
export interface Checked {
  allowed: boolean;
  /** the rate-limit headers for the response: the most restrictive rule's when allowed, the denying rule's with the longest wait when not */
  headers: Record<string, string>;
  /** present only when not allowed: the 429 (or the 400 for a malformed cost header) to send instead */
  response?: Response;
}

/**
 * Applies every rule whose `match` fits the request: matching, keys, costs, all-or-nothing and
 * refunds, as {@link enforce} does, then the headers in the configured forms. A request whose input
 * is invalid for a rule is not allowed, and its answer is the 400 problem.
 */
export async function check(request: Request, url: URL, rules: readonly Rule[], context: LimiterContext, options: HeaderOptions): Promise<Checked> {
  let verdict;
  try {
    verdict = await enforce(request, url, rules, context);
  } catch (error) {
    if (error instanceof HttpProblem) return { allowed: false, headers: {}, response: error.toResponse() };
    throw error;
  }
  const now = Date.now();
  if (!verdict.allowed) return denial(verdict.entries.filter((e) => !e.decision.allowed), now, options);
  const shown = mostRestrictive(verdict.entries);
  return { allowed: true, headers: shown ? rateLimitHeaders(shown.rule, shown.decision, now, options) : {} };
}

/**
 * The 429 for the denying entries: the headers of the one with the longest wait (the client cannot
 * succeed before every denying rule relents), and a problem naming every rule that denied.
 */
export function denial(denying: readonly Enforced[], now: number, options: HeaderOptions): Checked & { response: Response } {
  const shown = longestWait(denying)!;
  const names = denying.map((e) => e.rule.name);
  const seconds = Math.max(1, Math.ceil(shown.decision.retryAfter / 1000));
  const headers = rateLimitHeaders(shown.rule, shown.decision, now, options);
  return { allowed: false, headers, response: rateLimited(names, `Rate limit exceeded for ${names.join(", ")}; retry in ${seconds} s.`).toResponse(headers) };
}
