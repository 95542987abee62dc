/** The proxy's decision without the proxying: the verdict as headers to send, and the answer to send instead when denied. */
import type { HeaderOptions } from "../http/rate-limit-headers";
import { longestWait, mostRestrictive, rateLimitHeaders } from "../http/rate-limit-headers";
import type { IpLists } from "../config";
import { clientClosed, forbidden, HttpProblem, rateLimited } from "../http/problem";
import type { Rule } from "../config/types";
import type { LimiterContext } from "../limiter";
import type { ResponseHeaders } from "../limiter/result";
import { enforce, type Enforced } from "./enforce";
import { clientAddress } from "../routing/key";
import { ipKey } from "../limiter/ip-key";
import { keyHash } from "../metrics/analytics";
import { log } from "../metrics/log";
import { metrics } from "../metrics/metrics";

/** A request every applicable rule admits: add `headers` to its response. */
export interface Admitted {
  allowed: true;
  /** the rate-limit headers for the response: the most restrictive rule's */
  headers: Record<string, string>;
  response?: undefined;
  /**
   * present when a concurrency rule holds slots for the request: call it once the request is over
   * (its response sent, or failed) to give them back; never called, they are freed after the
   * rule's `slotTtl`
   */
  release?: () => Promise<void>;
  /**
   * present when a rule that counts by response (its `count`: "failed" or "successful") or reads
   * the request's real cost from it (`responseCost`) admitted the request: call it with the
   * response's status once you have it (or true or false for whether the request succeeded), and
   * its headers for `responseCost` (over the service binding as a plain object,
   * `Object.fromEntries(response.headers)`); what the request took under a rule that does not
   * count such a response is given back, and a `responseCost` rule charged the difference its
   * header says; never called, the request stays counted at its cost
   */
  settle?: (outcome: number | boolean, headers?: ResponseHeaders) => Promise<void>;
}

/** A request a rule refuses: send `response` instead. */
export interface Refused {
  allowed: false;
  /** the denying rule's rate-limit headers, the one with the longest wait (`response` carries them) */
  headers: Record<string, string>;
  /** the 429 (or the 400 for a malformed cost header) to send, or a 499 when the client went away while the request was held */
  response: Response;
  release?: undefined;
  settle?: undefined;
}

/**
 * What `check` says of a request (the binding's `check`, the library's `createGate` and the proxy
 * all use it); `allowed` tells which, so `if (!allowed) return response` type-checks.
 */
export type Checked = Admitted | Refused;

/** What a gate applies: the rules, the header forms, and the address lists. */
export interface GateSettings {
  rules: readonly Rule[];
  headers: HeaderOptions;
  ips: IpLists;
}

/**
 * Applies every rule whose `match` fits the request: matching, keys, costs, all-or-nothing and
 * refunds, as {@link enforce} does, then the headers in the configured forms. An address in
 * `DENY_IPS` is refused with a 403 and one in `ALLOW_IPS` is never limited, both before any rule
 * is asked (the address is `CF-Connecting-IP`'s, as the `ip` key part's). A request whose input is
 * invalid for a rule is not allowed, and its answer is the 400 problem. Dry-run rules decide and
 * count, and never deny or add a header. A request a gcra rule holds (its `delay`) is answered
 * once the hold is over, with the headers as they stand then.
 */
export async function check(request: Request, url: URL, gate: GateSettings, context: LimiterContext): Promise<Checked> {
  const ip = clientAddress(request);
  if (refused(ip, gate.ips)) return { allowed: false, headers: {}, response: refusal(ip, context.hashKey, context.waitUntil) };
  if (gate.ips.allow?.has(ip)) return { allowed: true, headers: {} };
  let verdict;
  try {
    verdict = await enforce(request, url, gate.rules, context);
  } catch (error) {
    if (error instanceof HttpProblem) return { allowed: false, headers: {}, response: error.toResponse() };
    throw error;
  }
  if (verdict.gone) return { allowed: false, headers: {}, response: clientClosed().toResponse() };
  const now = Date.now();
  const enforced = verdict.entries.filter((e) => !e.rule.dryRun);
  if (!verdict.allowed) return denial(enforced.filter((e) => !e.decision.allowed), now, gate.headers);
  const shown = mostRestrictive(enforced);
  const headers = shown ? rateLimitHeaders(shown.rule, shown.decision, now, gate.headers) : {};
  return { allowed: true, headers, ...(verdict.release ? { release: verdict.release } : {}), ...(verdict.settle ? { settle: verdict.settle } : {}) };
}

/**
 * The 403 for an address `DENY_IPS` refuses, counted in `floodgate_ip_refusals_total` and logged
 * as a denial (the address only as `keyHash`, of the key an `ip` part under the default
 * `ipv6Prefix` makes of it, so each spelling of a client hashes as a rule's denials of it do),
 * so the list can be seen working.
 */
export function refusal(ip: string | null, hashKey: string | undefined, waitUntil: ((promise: Promise<unknown>) => void) | undefined): Response {
  metrics.count("floodgate_ip_refusals_total");
  // Its own allowance of lines: a flood from a listed address must not crowd out the rules' denials.
  const write = log.admit("refused", Date.now());
  if (write) {
    const line = { decision: "denied", reason: "deny_ips", status: 403 };
    const logged = keyHash(hashKey, ipKey(ip) ?? "").then((hash) => write({ ...line, keyHash: hash }), () => write(line));
    waitUntil?.(logged);
  }
  return forbidden().toResponse();
}

/** Whether `DENY_IPS` refuses the address (an address in both lists is refused). */
export function refused(ip: string | null, ips: IpLists): boolean {
  return ips.deny?.has(ip) ?? false;
}

/**
 * The 429 for the denying entries: the headers of the one with the longest wait (the client cannot
 * succeed before every denying rule relents), and a problem naming every rule that denied; or,
 * when that rule has a `denyResponse`, its status and body with the same headers.
 */
export function denial(denying: readonly Enforced[], now: number, options: HeaderOptions): Checked & { response: Response } {
  const shown = longestWait(denying)!;
  const headers = rateLimitHeaders(shown.rule, shown.decision, now, options);
  const own = shown.rule.denyResponse;
  if (own?.body) return { allowed: false, headers, response: new Response(own.body.text, { status: own.status, headers: { ...headers, "Content-Type": own.body.contentType } }) };
  const names = denying.map((e) => e.rule.name);
  const seconds = Math.max(1, Math.ceil(shown.decision.retryAfter / 1000));
  const never = denying.filter((e) => e.decision.reason === "cost-exceeds-capacity").map((e) => e.rule.name);
  // Retrying such a request as it is will never help: say so, where the headers can only say when.
  const why = never.length > 0 ? ` The request costs more than ${never.join(", ")} can ever grant one request.` : "";
  return { allowed: false, headers, response: rateLimited(names, `Rate limit exceeded for ${names.join(", ")}; retry in ${seconds} s.${why}`, own?.status).toResponse(headers) };
}
