/** `floodgate/hono`: Hono middleware that limits each request it guards with floodgate, answering as the proxy does. */
import type { Context, MiddlewareHandler } from "hono";
import { ConfigError, show } from "../config/errors";
import { uncountable } from "../config/rules";
import type { Rule } from "../config/types";
import type { RateLimiterNamespace } from "../lib";
import { denial } from "../gate/check";
import { costOf } from "../gate/enforce";
import { failureResponse } from "../http/failure";
import { headerOptions, type HeaderForm } from "../http/header-options";
import { clientClosed, HttpProblem } from "../http/problem";
import { mostRestrictive, rateLimitHeaders, withRateLimitHeaders, type RuleDecision } from "../http/rate-limit-headers";
import { sendHolding } from "../http/in-flight";
import { limitKey, locatedAt, type LimiterContext } from "../limiter";
import { isNamespace } from "../durable-object/stub";
import { checkFlag, checkOptions } from "../limiter/arguments";
import { limitResult, type LimitResult } from "../limiter/result";
import { keyPart, trimOws } from "../routing/key-text";
import { countError } from "../metrics/log";
import { ruleOf, type RuleOption } from "./rule-of";

export type { LimitResult } from "../limiter/result";
export { ipKey } from "../limiter/ip-key";
export type { CalendarPeriod, Duration, DurationText, LimiterRule, RequestRule } from "../config/input";
export type { RuleOption } from "./rule-of";

declare module "hono" {
  interface ContextVariableMap {
    /** the decision of the innermost floodgate `rateLimit` that guarded the request (one given a `requestPropertyName` sets that variable instead) */
    rateLimit: LimitResult;
  }
}


/** The options of {@link rateLimit}. */
export interface RateLimitOptions<C extends Context = Context, P extends string = "rateLimit"> {
  /**
   * the name of the RateLimiter Durable Object binding in `c.env`, or a function of the context
   * returning the namespace (none there: a ConfigError naming the rule and `binding`, which Hono's
   * own error handler answers with the proxy's 500 problem+json); for a typed `c` here and in `key` and `skip`, name the context:
   * `rateLimit<Context<AppEnv>>({ … })`
   */
  binding: string | ((c: C) => RateLimiterNamespace);
  /**
   * one rule, as in RATE_LIMIT_RULES without `match`, `key` and `ipv6Prefix`, e.g. `{ name: "api",
   * limit: 100, period: "1m" }`; a `cost: "header:<name>"` is read from each request as the proxy
   * reads it (absent: 1; not a positive integer: the proxy's 400). Or a function of the context
   * choosing the request's rule, e.g. by plan: `(c) => (c.get("plan") === "pro" ? PRO : FREE)`;
   * each is checked the first time it is returned, and a bad one throws a ConfigError naming the
   * rule and field, which Hono's own error handler answers as the proxy answers an invalid rule. A key asked
   * under a changed rule of the same name carries its count over, as a deploy's change does; a
   * concurrency rule and a rate rule under one name are such an error too.
   */
  rule: RuleOption<C>;
  /**
   * the request's key, e.g. `(c) => c.req.header("x-api-key")`, made a key as the proxy makes a
   * header key part: the spaces and tabs around it dropped (a raw client's `K9 ` is `K9`), and `%`,
   * `|` and `#` escaped, so no value reads as a key of floodgate's own. Nothing (undefined, null or
   * "") counts the request under the rule's one shared key `#none`, as the proxy does for a missing
   * key part: limited together, never let through. A key function that throws, or returns
   * something other than a string, fails the request (Hono's error handler answers it); it never
   * lets it through unlimited.
   */
  key: (c: C) => string | null | undefined | Promise<string | null | undefined>;
  /**
   * requests the rule does not apply to, e.g. `(c) => c.req.header("x-internal") === env.TOKEN`:
   * when it returns true the request goes on uncounted, with no headers and no `rateLimit` variable
   * from this middleware; anything but true (a forgotten return) leaves it limited. A skip function
   * that throws fails the request, as a key function does.
   */
  skip?: (c: C) => boolean | Promise<boolean>;
  /**
   * answers a request the rule denies instead of the proxy's 429 problem+json, e.g. `(c, result) =>
   * c.json({ error: "slow down", retryAfterMs: result.retryAfter }, 429)`; its response gets the
   * rate-limit headers and `Retry-After` unless it is a 429 or 503 with a `Retry-After` of its own. A handler that
   * throws fails the request, never letting it through; one that returns no Response is an error.
   */
  handler?: (c: C, result: LimitResult) => Response | Promise<Response>;
  /** gives back what a request took when its response failed (as `requestWasSuccessful` says): only successes count; default false */
  skipFailedRequests?: boolean;
  /**
   * gives back what a request took when its response succeeded: only failures count, as for login
   * attempts, where a success should not use up the next attempts; default false
   */
  skipSuccessfulRequests?: boolean;
  /** what succeeded means for the two skips above; default: the response's status is below 400 */
  requestWasSuccessful?: (c: C) => boolean | Promise<boolean>;
  /** the RateLimit fields sent: "draft-10" (default), "draft-7", "draft-6" or "none" */
  headers?: HeaderForm;
  /** whether to send X-RateLimit-*; default true */
  legacyHeaders?: boolean;
  /**
   * the context variable the request's {@link LimitResult} is set at, as hono-rate-limiter's option
   * of that name: default "rateLimit". Stacked rateLimits each given their own name leave each
   * decision readable, where under one name only the innermost's is. With a named context, name
   * it in the call too: `rateLimit<Context<AppEnv>, "daily">({ …, requestPropertyName: "daily" })`.
   */
  requestPropertyName?: P;
}

/**
 * Limits every request the middleware guards under one rule: a denied request gets the proxy's 429
 * problem+json and headers; an allowed one continues, its response gets the rate-limit headers,
 * and `c.get("rateLimit")` holds the {@link LimitResult}. A gcra rule's hold (its `delay`) is
 * waited out before the next handler runs; if the client goes away first, the units are given back
 * and the handler never runs. The options are checked now: a bad rule throws an Error naming the field.
 * Several on one route act as the proxy's rules: a request one answers itself (429, 400, 499) or
 * fails (a throwing key, skip, rule or binding) gives back what the others took, and an allowed response shows the one with the fewest units left. A
 * dry-run rule given a malformed cost sits the request out: it sets no `rateLimit` variable. The
 * key is read before the cost, so that a malformed cost's refusal is counted under it.
 *
 * @example
 * app.use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "api", limit: 100, period: "1m" }, key: (c) => c.req.header("x-api-key") }));
 */
export function rateLimit<C extends Context = Context, P extends string = "rateLimit">(
  options: RateLimitOptions<C, P>,
): MiddlewareHandler<{ Variables: { [K in P]: LimitResult } }> {
  checkOptions(options, OPTIONS, "rateLimit", REQUIRED);
  const { binding, key, skip, handler, requestWasSuccessful = succeeded, requestPropertyName = "rateLimit" } = options;
  if (typeof binding !== "string" && typeof binding !== "function") throw new TypeError(`rateLimit: binding must be the name of the RateLimiter binding in c.env (e.g. "LIMITER") or a function of the context, got ${typeof binding}`);
  if (typeof key !== "function") throw new TypeError(`rateLimit: key must be a function of the context returning the request's key, got ${typeof key}`);
  if (skip !== undefined && typeof skip !== "function") throw new TypeError(`rateLimit: skip must be a function of the context returning true for a request the rule does not apply to, got ${typeof skip}`);
  if (handler !== undefined && typeof handler !== "function") throw new TypeError(`rateLimit: handler must be a function of the context and the LimitResult returning the denied request's Response, got ${typeof handler}`);
  if (typeof requestPropertyName !== "string" || requestPropertyName === "") throw new TypeError(`rateLimit: requestPropertyName must be the name of the context variable to set the result at (e.g. "apiLimit"), got ${requestPropertyName === "" ? '""' : typeof requestPropertyName}`);
  if (typeof requestWasSuccessful !== "function") throw new TypeError(`rateLimit: requestWasSuccessful must be a function of the context returning whether the request succeeded, got ${typeof requestWasSuccessful}`);
  const skipping = { failed: checkFlag(options.skipFailedRequests, "skipFailedRequests", "rateLimit"), successful: checkFlag(options.skipSuccessfulRequests, "skipSuccessfulRequests", "rateLimit") };
  if (skipping.failed && skipping.successful) throw new TypeError("rateLimit: skipFailedRequests and skipSuccessfulRequests together would count no request; keep one");
  const ruleFor = ruleOf(options.rule, (rule, fixed) => counting(rule, skipping, options.requestWasSuccessful !== undefined, fixed));
  const forms = headerOptions(options, "rateLimit");
  /** The request's decision: undefined when the rule sits it out, the Response when this rateLimit answers it, else its admission. */
  const admit = async (c: Context) => {
    // Only true skips: a function that forgot its return (undefined) leaves the request limited, never unlimited nor failed.
    if (skip && (await skip(c as unknown as C)) === true) return undefined;
    const rule = await ruleFor(c as unknown as C);
    const context = contextOf(c as unknown as C, binding, rule);
    const value = await key(c as unknown as C);
    if (value !== undefined && value !== null && typeof value !== "string") {
      throw new TypeError(`rateLimit("${rule.name}"): key must return a string, or nothing for the shared #none key; got ${typeof value}`);
    }
    // As the proxy makes a header part (a raw client's "K9 " is "K9", and "#none" is no one's but the missing key's).
    const named = keyPart(value ? trimOws(value) : null);
    let cost: number | undefined;
    try {
      cost = costOf({ rule, key: named }, c.req.raw, context);
    } catch (error) {
      if (error instanceof HttpProblem) return refuse(c, error.toResponse());
      throw error;
    }
    if (cost === undefined) return undefined;
    const signal = c.req.raw.signal;
    // A request held by a gcra delay whose client went away gave its units back: nothing to serve.
    const held = await limitKey(context, rule, named, cost, signal).catch((error: unknown) => {
      if (signal.aborted) return undefined;
      throw error;
    });
    if (!held) return refuse(c, clientClosed().toResponse());
    const { decision, release, charge } = held;
    const result = limitResult(rule, decision, { release, charge });
    c.set(requestPropertyName as "rateLimit", result);
    const now = Date.now();
    // A dry-run rule never denies and adds no header: the request goes on as if it were not there.
    if (!decision.allowed && !rule.dryRun) {
      const denied = denial([{ rule, decision }], now, forms);
      if (!handler) return refuse(c, denied.response);
      // Noted first: the rateLimits around give their units back even when the handler throws (an HTTPException, say).
      verdicts.set(c, { refused: true });
      return withRateLimitHeaders(await answered(handler, c as unknown as C, result, rule.name), denied.headers);
    }
    return { context, rule, signal, held, now };
  };
  return async function rateLimitMiddleware(c, next) {
    const admitted = await admit(c).catch((error: unknown) => {
      // This rateLimit failed the request (its key, skip, rule or binding threw): as for its 429, the rateLimits around give back what they took.
      verdicts.set(c, { refused: true });
      if (error instanceof ConfigError) throw answerable(error);
      throw error;
    });
    if (admitted === undefined) return next();
    if (admitted instanceof Response) return admitted;
    const { context, rule, signal, held, now } = admitted;
    const { decision, release, refund, settle } = held;
    // A concurrency rule's slots are held until the handler's response has been sent.
    try {
      c.res = await sendHolding(release, signal, context.waitUntil, async () => {
        await next();
        return c.res;
      }, c.req.method === "HEAD");
    } catch (error) {
      // Past Hono's error handler (a non-Error thrown, an onError that threw): the request failed with no response to judge.
      const ended = verdicts.get(c)?.refused ? refund() : settle?.(false).catch(countError("refund", rule));
      if (ended && context.waitUntil) context.waitUntil(ended);
      else await ended;
      throw error;
    }
    // rateLimits further in decided too: as the proxy's rules, all or nothing, the most restrictive shown.
    const verdict = verdicts.get(c);
    if (verdict?.refused) {
      const refunded = refund();
      if (!context.waitUntil) await refunded;
      return;
    }
    // A rule that counts by response gives back what a request it does not count took; the response stands whatever happens.
    const outcome = settle ? await judged(requestWasSuccessful, c as unknown as C, rule.name) : undefined;
    if (settle && outcome !== undefined) {
      const settled = settle(outcome, c.res.headers).catch(countError("refund", rule));
      if (context.waitUntil) context.waitUntil(settled);
      else await settled;
    }
    const mine = { rule, decision };
    if (rule.dryRun || mostRestrictive([mine, ...(verdict?.shown ? [verdict.shown] : [])]) !== mine) return;
    verdicts.set(c, { shown: mine });
    c.res = withRateLimitHeaders(c.res, rateLimitHeaders(rule, decision, now, forms));
  };
}

/**
 * What the rateLimits a request passed through said of it, by its context: one of them answered it
 * itself (a 429, the 400 of a malformed cost, a client gone while held), or the entry whose
 * headers the response carries.
 */
const verdicts = new WeakMap<Context, { refused?: true; shown?: RuleDecision }>();

/** Answers the request with `response`, noted for the rateLimits around this one: they give their units back. */
function refuse(c: Context, response: Response): Response {
  verdicts.set(c, { refused: true });
  return response;
}

/** The default of `requestWasSuccessful`: the response's status, as hono-rate-limiter and express-rate-limit read it. */
const succeeded = (c: Context) => c.res.status < 400;

/**
 * The rule as the middleware applies it: the skips are its `count` (skipSuccessfulRequests counts
 * only failed requests), so one mechanism gives units back. For the rule the middleware was given
 * (`fixed`), refuses skips its algorithm cannot count by (see `uncountable`) or that say twice
 * what its own `count` says, and a `requestWasSuccessful` nothing reads. A rule function's rules
 * take the skips where they apply: a rule with a `count` of its own keeps it, and a bucket or a
 * concurrency rule counts every request.
 */
function counting(rule: Rule, skipping: Skipping, judged: boolean, fixed: boolean): Rule {
  const skipped = skipping.successful ? "failed" : skipping.failed ? "successful" : undefined;
  const uncounted = skipped && uncountable(rule.algorithm);
  const misfit =
    skipped && rule.count !== "all"
      ? `the rule's count ("${rule.count}") already says which requests it counts; remove skipFailedRequests and skipSuccessfulRequests`
      : uncounted
        ? `skipFailedRequests and skipSuccessfulRequests are the rule's count: ${uncounted}`
        : judged && !skipped && rule.count === "all"
          ? "requestWasSuccessful is read only with skipFailedRequests, skipSuccessfulRequests or a rule's count; add one, or remove it"
          : undefined;
  if (misfit && fixed) throw new TypeError(`rateLimit("${rule.name}"): ${misfit}`);
  return skipped && !misfit ? { ...rule, count: skipped } : rule;
}

/**
 * Whether the request succeeded, as `requestWasSuccessful` says: true or false. Anything else, or
 * a throw, is counted and logged, and undefined: the request's units stay spent (a forgotten
 * return never gives units back) and its response stands.
 */
async function judged<C extends Context>(requestWasSuccessful: (c: C) => boolean | Promise<boolean>, c: C, rule: string): Promise<boolean | undefined> {
  try {
    const said: unknown = await requestWasSuccessful(c);
    if (typeof said === "boolean") return said;
    throw new TypeError(`rateLimit("${rule}"): requestWasSuccessful must return true or false, got ${said === null ? "null" : typeof said}; the request stays counted`);
  } catch (error) {
    countError("request_was_successful", { name: rule })(error);
    return undefined;
  }
}

/** Which responses give back what their request took. */
interface Skipping {
  failed: boolean;
  successful: boolean;
}

/** The handler's answer to a denied request, which must be a Response: anything else would reach the client as Hono's 500 with no word of why. */
async function answered<C extends Context>(handler: NonNullable<RateLimitOptions<C>["handler"]>, c: C, result: LimitResult, rule: string): Promise<Response> {
  const response = await handler(c, result);
  if (!(response instanceof Response)) throw new TypeError(`rateLimit("${rule}"): handler must return a Response for the denied request, got ${response === null ? "null" : typeof response}`);
  return response;
}

/**
 * A rule its function returned, or a binding, that is not valid, as Hono's error handling takes it:
 * the app's `onError` still sees the ConfigError, and Hono's own handler answers with what its
 * `getResponse` gives (it reads that method, as of an HTTPException): the proxy's 500 problem+json
 * for an invalid configuration, counted and logged once.
 */
function answerable(error: ConfigError): ConfigError & { getResponse(): Response } {
  const response = failureResponse(error);
  return Object.assign(error, { getResponse: () => response.clone() });
}

const OPTIONS = ["binding", "rule", "key", "skip", "handler", "skipFailedRequests", "skipSuccessfulRequests", "requestWasSuccessful", "headers", "legacyHeaders", "requestPropertyName"];
const REQUIRED = ["binding", "rule", "key"];

/** The request's limiter context, from the namespace `binding` names; a ConfigError naming the rule and the binding when it is none. */
function contextOf<C extends Context>(c: C, binding: RateLimitOptions<C>["binding"], rule: Rule): LimiterContext {
  const namespace = typeof binding === "string" ? (c.env as Record<string, unknown> | undefined)?.[binding] : binding(c);
  if (!isNamespace(namespace)) {
    const expected = typeof binding === "string" ? `the RateLimiter Durable Object namespace at c.env.${binding}` : "the binding function to return the RateLimiter Durable Object namespace";
    throw ConfigError.topLevel(`expected ${expected} (bind the RateLimiter class in wrangler.toml), got ${show(namespace)}`, `rateLimit("${rule.name}").binding`);
  }
  let waitUntil: LimiterContext["waitUntil"];
  try {
    const ctx = c.executionCtx;
    waitUntil = (promise) => ctx.waitUntil(promise);
  } catch {
    // No ExecutionContext (a test calling app.request without one): strict calls go one by one.
  }
  return locatedAt({ namespace, ...(waitUntil ? { waitUntil } : {}) }, c.req.raw);
}
