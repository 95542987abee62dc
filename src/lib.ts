/** The `floodgate` package: the RateLimiter Durable Object, a limiter for one rule, and a gate for a rule set, to use from your own Worker. */
import { parseIpVar } from "./config";
import type { DurationText, LimiterRule, RuleSetInput } from "./config/input";
import { parseConfig, parseStandaloneRule } from "./config/rules";
import type { Env } from "./env";
import { check, type Checked } from "./gate/check";
import { headerOptions, type HeaderForm } from "./http/header-options";
import { isNamespace } from "./durable-object/stub";
import { checkCallContext, checkCost, checkKey, checkNoMore, checkOptions, checkRequest, checkTimeout, checkWhereabouts, describe } from "./limiter/arguments";
import { claimKind, kindsTable } from "./limiter/kinds";
import { forget, limitKey, peekedOwnerOf, peekKey, type LimiterContext } from "./limiter";
import { limitWithin } from "./limiter/wait";
import { limitResult, type LimitResult } from "./limiter/result";
import type { IpList } from "./routing/cidr";
import { durableObjectName } from "./routing/key";

export { RateLimiter } from "./durable-object/rate-limiter";
/** What `limiter`, `createGate` and `rateLimit` throw for a rule set they cannot apply: `field`, `rule` and `problem` say where and what. */
export { ConfigError } from "./config/errors";
export type { LimitResult } from "./limiter/result";
export { ipKey } from "./limiter/ip-key";
export type { Checked } from "./gate/check";
export type { HeaderForm } from "./http/header-options";
/** The floodgate Worker's service binding, for `Service<Floodgate>` in your Env. */
export type { Floodgate, LimitOptions, KeyOptions, WaitOptions } from "./binding/floodgate";
/** The rule format as types, for rules written in code: `LimiterRule` for `limiter`, `RequestRule` for the Hono middleware, `RuleSetInput` for `createGate`. */
export type { CalendarPeriod, Duration, DurationText, KeyOverrideInput, KeyPart, LimiterRule, RequestRule, RuleInput, RuleSetInput } from "./config/input";

/**
 * The namespace of the RateLimiter class, as bound in your wrangler.toml (`new_sqlite_classes`):
 * typed with the class (as `wrangler types` writes it) or without it (`DurableObjectNamespace`, as
 * a hand-written Env often has it).
 */
export type RateLimiterNamespace = Env["LIMITER"] | DurableObjectNamespace;

/** The per-call options of {@link Limiter.limit}. */
export interface LimitCallOptions {
  /** units this call takes; default the rule's `cost` (1 unless it sets one) */
  cost?: number;
  /** the request's ExecutionContext: fast mode needs it for its background syncs, and strict mode batches concurrent calls with it */
  ctx?: Pick<ExecutionContext, "waitUntil">;
  /** the request's `request.cf.colo`: a rule with `aggregate: "location"` syncs through that location's relay */
  location?: string | undefined;
  /** the request's `request.cf.continent`: a rule with `aggregate: "continent"` syncs through that continent's relay, and one with `"auto"` (a fast rule's default) once many isolates share the key */
  continent?: string | undefined;
  /**
   * a gcra rule with a `delay` below its `burst` holds a call past it until it conforms: `limit`
   * resolves that much later. Aborting this signal while held gives the units back and rejects
   * with its reason (pass `request.signal` to give them back when the client goes away); a signal
   * already aborted rejects at once, consuming nothing.
   */
  signal?: AbortSignal;
}

const LIMIT_OPTIONS = ["cost", "ctx", "location", "continent", "signal"] satisfies (keyof LimitCallOptions)[];

/** One rule, for keys you choose. */
export interface Limiter {
  /** Decides `cost` units for `key`. */
  limit(key: string, options?: LimitCallOptions): Promise<LimitResult>;
  /**
   * `limit`, waiting for the key to admit the call for up to `timeout` (milliseconds, or a
   * duration like "5s"): a denial whose `retryAfter` ends within it is waited out and asked again;
   * one that would not, or a cost the rule can never grant, is answered at once. Upstash's
   * `blockUntilReady`, for work that can wait (a queue consumer calling a third-party API).
   */
  blockUntilReady(key: string, timeout: number | DurationText, options?: LimitCallOptions): Promise<LimitResult>;
  /** The key's standing, consuming nothing: `success` and `retryAfter` as for a one-unit request now. */
  peek(key: string): Promise<LimitResult>;
  /** Forgets the key: its next request starts from a full quota. */
  reset(key: string): Promise<void>;
}

/**
 * A limiter for one rule, validated now by the parser the proxy uses: the fields of a
 * `RATE_LIMIT_RULES` rule except `match` and `key`, which have no meaning here, and a header
 * `cost`, a `responseCost` or a `denyResponse`, which need a request and its response (pass `cost`
 * to `limit`, call `charge` on its result, answer a denial as you like). Throws an Error naming
 * the field, e.g. `rule ("api").period: expected a duration like "10s" …`.
 *
 * @example
 * import { limiter, RateLimiter } from "floodgate";
 * export { RateLimiter };
 * const api = limiter(env.LIMITER, { name: "api", limit: 100, period: "1m" });
 * const { success, retryAfter } = await api.limit(userId, { ctx });
 */
export function limiter(bound: RateLimiterNamespace, rule: LimiterRule): Limiter {
  const namespace = requireNamespace(bound, "limiter");
  const parsed = parseStandaloneRule(rule);
  claimKind(limiterKinds, parsed, (problem) => new TypeError(`limiter: ${problem}`));
  const where = (method: string) => `limiter("${parsed.name}").${method}`;
  /** A call's key, cost and context, each checked, or a TypeError naming the method and what to pass. */
  const callOf = (method: string, key: unknown, options: LimitCallOptions) => {
    const checked = checkKey(key, where(method));
    checkOptions(options, LIMIT_OPTIONS, where(method));
    const cost = checkCost(options.cost, parsed, where(method));
    const from = checkWhereabouts(options, where(method));
    checkCallContext(options, where(method));
    // A call whose caller has already gone away asks for nothing.
    options.signal?.throwIfAborted();
    if (parsed.mode === "fast" && !options.ctx) throw new TypeError(`${where(method)}: a fast rule needs { ctx }, the request's ExecutionContext, for its background syncs`);
    const waitUntil = options.ctx ? (promise: Promise<unknown>) => options.ctx!.waitUntil(promise) : undefined;
    const context: LimiterContext = { namespace, ...(waitUntil ? { waitUntil } : {}), ...from };
    return { context, checked, cost };
  };
  return {
    async limit(key, options = {}) {
      checkNoMore(arguments, 2, where("limit"), "a key and options");
      const { context, checked, cost } = callOf("limit", key, options);
      const { decision, release, settle, charge } = await limitKey(context, parsed, checked, cost, options.signal);
      return limitResult(parsed, decision, { release, settle, charge });
    },
    async blockUntilReady(key, timeout, options = {}) {
      checkNoMore(arguments, 3, where("blockUntilReady"), "a key, a timeout and options");
      const { context, checked, cost } = callOf("blockUntilReady", key, options);
      const { decision, release, settle, charge } = await limitWithin(context, parsed, checked, cost, checkTimeout(timeout, where("blockUntilReady")), options.signal);
      return limitResult(parsed, decision, { release, settle, charge });
    },
    async peek(key) {
      checkNoMore(arguments, 1, where("peek"), "a key");
      const owner = await peekedOwnerOf(parsed, checkKey(key, where("peek")), Date.now());
      return limitResult(parsed, await peekKey({ namespace }, owner.rule, owner.objectName));
    },
    async reset(key) {
      checkNoMore(arguments, 1, where("reset"), "a key");
      await forget(namespace, parsed, await durableObjectName(parsed.name, checkKey(key, where("reset"))));
    },
  };
}

/** The options of {@link createGate}. */
export interface GateOptions {
  /** the RateLimit fields sent: "draft-10" (default), "draft-7", "draft-6" or "none" */
  headers?: HeaderForm;
  /** whether to send X-RateLimit-*; default true */
  legacyHeaders?: boolean;
  /** addresses and CIDRs never limited by any rule, as the `ALLOW_IPS` var: comma-separated, or an array */
  allowIps?: string | readonly string[];
  /** addresses and CIDRs answered 403 before any rule, as the `DENY_IPS` var (wins over `allowIps`) */
  denyIps?: string | readonly string[];
}

const GATE_OPTIONS = ["headers", "legacyHeaders", "allowIps", "denyIps"] satisfies (keyof GateOptions)[];

/** A whole rule set, applied to requests as the proxy applies it. */
export interface Gate {
  check(request: Request, ctx: Pick<ExecutionContext, "waitUntil">): Promise<Checked>;
}

/**
 * A gate for a rule set in the `RATE_LIMIT_RULES` format (a JSON string, `{"rules": […]}` or an
 * array), validated now: `check` is the binding's `check`, the proxy without the proxying.
 *
 * @example
 * const gate = createGate(env.LIMITER, [{ name: "per-ip", key: "ip", limit: 100, period: "1m" }]);
 * const { allowed, headers, response } = await gate.check(request, ctx);
 * if (!allowed) return response;
 */
export function createGate(bound: RateLimiterNamespace, rules: RuleSetInput, options: GateOptions = {}): Gate {
  const namespace = requireNamespace(bound, "createGate");
  checkOptions(options, GATE_OPTIONS, "createGate");
  const gate = { rules: parseConfig(rules).rules, headers: headerOptions(options, "createGate"), ips: { allow: ipOption(options.allowIps, "allowIps"), deny: ipOption(options.denyIps, "denyIps") } };
  return {
    async check(request, ctx) {
      const where = "createGate(…).check";
      checkRequest(request, where);
      checkCallContext({ ctx }, where, true);
      checkNoMore(arguments, 2, where, "a Request and the request's ExecutionContext");
      return check(request, new URL(request.url), gate, { namespace, waitUntil: (promise) => ctx.waitUntil(promise) });
    },
  };
}

/** `createGate`'s `allowIps` or `denyIps`, parsed as the vars they stand for are. */
function ipOption(raw: unknown, option: "allowIps" | "denyIps"): IpList | null {
  const list = typeof raw === "string" || (Array.isArray(raw) && raw.every((entry) => typeof entry === "string"));
  if (raw !== undefined && !list) throw new TypeError(`createGate: ${option} must be addresses and CIDRs, comma-separated in a string or in an array of strings, got ${JSON.stringify(raw) ?? typeof raw}`);
  return parseIpVar(raw, `createGate: ${option}`);
}

/** A mistyped binding (`env.LIMITR`) must fail loudly here, not decide every request by onError later. */
function requireNamespace(namespace: unknown, where: string): Env["LIMITER"] {
  if (!isNamespace(namespace)) {
    throw new TypeError(`${where}: the first argument must be the RateLimiter Durable Object namespace (env.LIMITER as bound in wrangler.toml), got ${nameOf(namespace)}`);
  }
  return namespace;
}

/** What was passed instead: its class where it has one (`[object Fetcher]`, a service binding), else as any argument is named. */
function nameOf(value: unknown): string {
  const tag = Object.prototype.toString.call(value);
  return typeof value === "object" && value !== null && tag !== "[object Object]" ? tag : describe(value);
}

/** The kinds of the rules limiters were made with in this isolate, by name: a key's object is its rule's name and the key. */
const limiterKinds = kindsTable();
