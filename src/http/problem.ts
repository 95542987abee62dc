/** The one error type for HTTP answers: an RFC 9457 problem that knows how to become a Response. */

/**
 * The problem type draft-ietf-httpapi-ratelimit-headers-10 registers for a request over its quota;
 * floodgate owns no domain to mint types under, so its own problems are URNs (see {@link ProblemInit}).
 */
export const QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** Where a floodgate problem name goes: `invalid-config` is `urn:floodgate:problem:invalid-config`. */
const URN_PREFIX = "urn:floodgate:problem:";

/** What a problem is made of; `extras` become further members of the JSON body. */
export interface ProblemInit {
  /**
   * The problem type: a URI, used as it is (`about:blank` when the status says it all, RFC 9457
   * §4.2.1, with the status phrase as the title; {@link QUOTA_EXCEEDED}), or the name of a problem
   * with floodgate's own semantics, e.g. `invalid-config`, which becomes a `urn:floodgate:problem:` URN.
   */
  type: string;
  status: number;
  title: string;
  detail: string;
  extras?: Record<string, unknown>;
  /** headers the response always carries, e.g. `WWW-Authenticate` on a 401 */
  headers?: Record<string, string>;
}

/**
 * An HTTP error answer. Throw it or return `problem.toResponse()`; the body is
 * `{type, title, status, detail, ...extras}` as `application/problem+json`.
 *
 * @example
 * throw new HttpProblem({ type: "invalid-request", status: 400, title: "Invalid request", detail: "…" }); // urn:floodgate:problem:invalid-request
 * throw new HttpProblem({ type: "about:blank", status: 404, title: "Not Found", detail: "…" });
 * // at the edge:
 * catch (e) { if (e instanceof HttpProblem) return e.toResponse(); throw e; }
 */
export class HttpProblem extends Error {
  override readonly name = "HttpProblem";
  /** the problem type's URI */
  readonly type: string;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly extras: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;

  constructor(init: ProblemInit) {
    super(init.detail);
    // A name has no scheme; every URI does.
    this.type = init.type.includes(":") ? init.type : URN_PREFIX + init.type;
    this.status = init.status;
    this.title = init.title;
    this.detail = init.detail;
    this.extras = init.extras ?? {};
    this.headers = init.headers ?? {};
  }

  /**
   * The problem as a Response. `headers` (rate-limit headers, say) are added to the problem's
   * own; Content-Type is always `application/problem+json`, and extras never replace the
   * standard members.
   *
   * @example
   * rateLimited(["login"], "Too many login attempts.").toResponse(rateLimitHeaders(rule, decision, now, settings.headers));
   */
  toResponse(headers?: HeadersInit): Response {
    const body: Record<string, unknown> = { type: this.type, title: this.title, status: this.status, detail: this.detail };
    for (const [member, value] of Object.entries(this.extras)) if (!Object.hasOwn(body, member)) body[member] = value;
    const responseHeaders = new Headers(this.headers);
    new Headers(headers).forEach((value, name) => responseHeaders.set(name, value));
    responseHeaders.set("Content-Type", "application/problem+json");
    return new Response(JSON.stringify(body), { status: this.status, headers: responseHeaders });
  }
}

/**
 * 429: the request was denied; `violatedPolicies` are the names of the rules that denied it. The
 * type is the IANA-registered quota-exceeded problem type. `status` is another when the rule's
 * `denyResponse` names one (a 503, as nginx's `limit_req` answers).
 *
 * @example
 * rateLimited(["api-per-key"], "Rate limit exceeded for api-per-key; retry in 12 s.");
 */
export function rateLimited(violatedPolicies: string[], detail: string, status = 429): HttpProblem {
  return new HttpProblem({
    type: QUOTA_EXCEEDED, status, title: "Too Many Requests", detail,
    extras: { "violated-policies": violatedPolicies },
  });
}

/**
 * 500: the configuration is invalid; `detail` names the rule and field at fault.
 *
 * @example
 * invalidConfig("rules[1].period: expected seconds or a duration such as 10s, got \"soon\"");
 */
export function invalidConfig(detail: string): HttpProblem {
  return new HttpProblem({ type: "invalid-config", status: 500, title: "Invalid Configuration", detail });
}

/**
 * 400: the request's input is invalid for a rule (a bad cost header, say).
 *
 * @example
 * invalidRequest('rule "upload": header x-cost: expected a positive integer, got "abc"');
 */
export function invalidRequest(detail: string): HttpProblem {
  return new HttpProblem({ type: "invalid-request", status: 400, title: "Invalid Request", detail });
}

/** What every 502 says but its detail: the origin failed floodgate, whichever way. */
const BAD_GATEWAY = { type: "about:blank", status: 502, title: "Bad Gateway" } as const;

/**
 * 502: the origin could not be reached, or answered with what cannot be passed on; nothing about it is revealed but that.
 *
 * @example
 * try { upstream = await fetch(target, init); } catch { throw badGateway(); }
 */
export function badGateway(detail = "The origin could not be reached."): HttpProblem {
  return new HttpProblem({ ...BAD_GATEWAY, detail });
}

/** The 502 for an origin that was reached but whose final answer was lost (see `forward`, ./proxy): how its request ended is unknown. */
export class AnswerLost extends HttpProblem {
  constructor(detail: string) {
    super({ ...BAD_GATEWAY, detail });
  }
}

/**
 * 499 (nginx's "Client Closed Request"): the client went away while its request was held, so it
 * was not proxied. No one reads it; it is what logs and `wrangler tail` show for such a request.
 */
export function clientClosed(): HttpProblem {
  return new HttpProblem({ type: "about:blank", status: 499, title: "Client Closed Request", detail: "The client went away while its request was held; it was not proxied." });
}

/**
 * 401 for the admin API. The same answer whether the token was missing, malformed or wrong,
 * so it tells a caller nothing about the token.
 *
 * @example
 * if (!(await bearerMatches(request.headers.get("Authorization"), env.ADMIN_TOKEN))) return unauthorized().toResponse();
 */
export function unauthorized(): HttpProblem {
  return new HttpProblem({
    type: "about:blank", status: 401, title: "Unauthorized",
    detail: "This endpoint needs a valid bearer token.",
    // RFC 9110 §15.5.2: a 401 must say which scheme to use.
    headers: { "WWW-Authenticate": 'Bearer realm="floodgate"' },
  });
}

/**
 * 404, revealing nothing about what exists (the admin API without ADMIN_TOKEN answers this).
 *
 * @example
 * if (env.ADMIN_TOKEN === undefined) return notFound().toResponse();
 */
export function notFound(): HttpProblem {
  return new HttpProblem({ type: "about:blank", status: 404, title: "Not Found", detail: "There is nothing here." });
}

/**
 * 403 for an address in `DENY_IPS`: the same answer whatever was asked, before anything else.
 *
 * @example
 * if (settings.ips.deny?.has(request.headers.get("CF-Connecting-IP"))) return forbidden().toResponse();
 */
export function forbidden(): HttpProblem {
  return new HttpProblem({ type: "about:blank", status: 403, title: "Forbidden", detail: "Requests from this address are refused." });
}
