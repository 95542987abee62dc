/** The Floodgate service binding: another Worker's RPC door to the same rules, keys and decisions as the proxy. */
import { WorkerEntrypoint } from "cloudflare:workers";
import { loadSettings, requireLimiter, type Settings } from "../config";
import type { DurationText } from "../config/input";
import type { Rule } from "../config/types";
import type { Env } from "../env";
import { setCapacity } from "../fast";
import type { Whereabouts } from "../fast/relay";
import { check, type Checked } from "../gate/check";
import { checkCost, checkKey, checkNoMore, checkOptions, checkRequest, checkTimeout, checkWhereabouts } from "../limiter/arguments";
import { forget, limitKey, peekedOwnerOf, peekKey, workerContext, type LimiterContext } from "../limiter";
import { limitResult, type LimitResult } from "../limiter/result";
import { limitWithin } from "../limiter/wait";
import { warnOnce } from "../metrics/log";
import { durableObjectName } from "../routing/key";
import { TimeoutError } from "../strict/timeout";

/** What the binding's `props` may say: the rule a call uses when it names none. */
export interface FloodgateProps {
  rule?: string;
}

/** `limit`'s argument; `rule` may be left out when `props.rule` names one or there is only one rule. */
export interface LimitOptions {
  rule?: string;
  key: string;
  cost?: number;
  /** the caller's `request.cf.colo`: a rule with `aggregate: "location"` syncs through that location's relay */
  location?: string | undefined;
  /** the caller's `request.cf.continent`: a rule with `aggregate: "continent"` syncs through that continent's relay, and one with `"auto"` (a fast rule's default) once many isolates share the key */
  continent?: string | undefined;
}

/** `blockUntilReady`'s argument: `limit`'s, and how long it may wait (milliseconds, or a duration like "5s"). */
export interface WaitOptions extends LimitOptions {
  timeout: number | DurationText;
}

/** `peek`'s and `reset`'s argument: `limit`'s but the cost, so one object of the key and where it is asked from serves all three. */
export type KeyOptions = Omit<LimitOptions, "cost">;

const LIMIT_OPTIONS = ["rule", "key", "cost", "location", "continent"] satisfies (keyof LimitOptions)[];
const KEY_OPTIONS = ["rule", "key", "location", "continent"] satisfies (keyof KeyOptions)[];
const WAIT_OPTIONS = [...LIMIT_OPTIONS, "timeout"] satisfies (keyof WaitOptions)[];

/**
 * Bound from another Worker (`[[services]] binding = "FLOODGATE", service = "floodgate",
 * entrypoint = "Floodgate"`). Every method reads `RATE_LIMIT_RULES` as the proxy does and decides
 * with the same core: strict through the key's object, fast from this isolate's lease, with the
 * same breaker, timeout and `onError`. Bad arguments reject with an Error that says what to pass,
 * and consume nothing. Only its public methods are callable over RPC: the helpers are `#private`,
 * which a binding cannot reach (a TypeScript `private` is an ordinary method at run time, and
 * would hand a caller the parsed settings, `ANALYTICS_HASH_KEY` included).
 *
 * @example
 * const { success } = await env.FLOODGATE.limit({ key: userId }); // props.rule names the rule
 */
export class Floodgate extends WorkerEntrypoint<Env, FloodgateProps> {
  /**
   * Decides `cost` units (default: the rule's constant cost, 1 unless it sets one) for `key` under
   * the rule. A gcra rule's hold (its `delay`) is waited out here: the call resolves that much later.
   * RPC carries no AbortSignal, so a caller that goes away meanwhile does not get the units back.
   */
  async limit(options: LimitOptions): Promise<LimitResult> {
    const { rule, key, from } = this.#resolve(options, arguments, "limit", LIMIT_OPTIONS);
    const cost = checkCost(options.cost, rule, "limit");
    const { rule: keyed, decision, release, settle, charge } = await limitKey({ ...this.#context(), ...from }, rule, key, cost);
    return limitResult(keyed, decision, { release, settle, charge });
  }

  /**
   * `limit`, waiting up to `timeout` for the key to admit the call: a denial whose `retryAfter`
   * ends within it is waited out and asked again; one that would not is answered at once.
   */
  async blockUntilReady(options: WaitOptions): Promise<LimitResult> {
    const { rule, key, from } = this.#resolve(options, arguments, "blockUntilReady", WAIT_OPTIONS, ["key", "timeout"]);
    const cost = checkCost(options.cost, rule, "blockUntilReady");
    const timeoutMs = checkTimeout(options.timeout, "blockUntilReady");
    const { rule: keyed, decision, release, settle, charge } = await limitWithin({ ...this.#context(), ...from }, rule, key, cost, timeoutMs);
    return limitResult(keyed, decision, { release, settle, charge });
  }

  /**
   * Applies every rule whose `match` fits the request, exactly as the proxy does, without proxying:
   * the headers to add to the caller's response, and when not allowed the 429 (or 400) floodgate
   * would have sent.
   */
  async check(request: Request): Promise<Checked> {
    checkRequest(request, "check");
    checkNoMore(arguments, 1, "check", "a Request");
    checkProps(this.ctx.props, "check");
    const settings = this.#settings();
    return check(request, new URL(request.url), settings, this.#context(settings));
  }

  /** The key's standing, consuming nothing: `success` and `retryAfter` as for a one-unit request now. */
  async peek(options: KeyOptions): Promise<LimitResult> {
    const { rule, key } = this.#resolve(options, arguments, "peek", KEY_OPTIONS);
    const owner = await peekedOwnerOf(rule, key, Date.now());
    return limitResult(owner.rule, await peekKey(this.#context(), owner.rule, owner.objectName).catch(namedAcrossRpc));
  }

  /** Forgets the key: its next request starts from a full quota. */
  async reset(options: KeyOptions): Promise<void> {
    const { rule, key } = this.#resolve(options, arguments, "reset", KEY_OPTIONS);
    await forget(this.env.LIMITER, rule, await durableObjectName(rule.name, key)).catch(namedAcrossRpc);
  }

  #settings(): Settings {
    const settings = loadSettings(this.env);
    requireLimiter(this.env);
    setCapacity(settings.fastMaxKeys);
    warnOnce(settings.warnings);
    return settings;
  }

  #context(settings = this.#settings()): LimiterContext {
    return workerContext(this.env.LIMITER, this.ctx, settings);
  }

  /**
   * The rule a call names (or props.rule, or the only rule), its key and where it comes from, or an
   * Error saying what is wrong. Where a call comes from means nothing to peek or reset, but a
   * malformed place is an error there too.
   */
  #resolve(options: unknown, given: ArrayLike<unknown>, method: string, known: readonly string[], required = ["key"]): { rule: Rule; key: string; from: Whereabouts } {
    checkOptions(options, known, method, required);
    checkNoMore(given, 1, method, "one options object");
    checkProps(this.ctx.props, method);
    const from = checkWhereabouts(options, method);
    const { rule: named, key } = options as { rule?: unknown; key?: unknown };
    if (named !== undefined && typeof named !== "string") throw new TypeError(`${method}: rule must be a rule's name, or left out, got ${named === null ? "null" : typeof named}`);
    const fromProps = named === undefined && this.ctx.props?.rule !== undefined;
    return { rule: ruleNamed(this.#settings().rules, named ?? this.ctx.props?.rule, method, fromProps), key: checkKey(key, method), from };
  }
}

/** The binding's `props` as its wrangler.toml gives them: `rule` alone, so a `cost` or a misspelled `rul` there is never silently ignored. */
function checkProps(props: unknown, method: string): void {
  if (props === undefined || props === null) return;
  const unknown = typeof props === "object" ? Object.keys(props).filter((name) => name !== "rule") : [];
  if (typeof props !== "object" || unknown.length > 0) {
    const what = unknown.length > 0 ? `props.${unknown[0]}` : `props of type ${typeof props}`;
    throw new TypeError(`${method}: the binding's ${what} is not something floodgate reads; its props take only "rule" (the rule a call uses when it names none), and a call's own options (cost, key) go in the call`);
  }
}

/**
 * RPC hands a caller an Error subclass of its own as a plain `Error` (its name only in the message,
 * "TimeoutError: …"), but a DOMException whole: a timeout crosses as the web's own TimeoutError
 * (AbortSignal.timeout's), so `error.name === "TimeoutError"` holds on both sides.
 */
function namedAcrossRpc(error: unknown): never {
  if (error instanceof TimeoutError) throw new DOMException(error.message, "TimeoutError");
  throw error;
}

function ruleNamed(rules: readonly Rule[], name: unknown, method: string, fromProps: boolean): Rule {
  const names = rules.map((r) => JSON.stringify(r.name)).join(", ") || "none";
  if (name === undefined) {
    if (rules.length === 1) return rules[0]!;
    throw new TypeError(`${method}: name a rule ({ rule: "…" }, or props.rule on the binding): RATE_LIMIT_RULES has ${rules.length} (${names})`);
  }
  const rule = typeof name === "string" ? rules.find((r) => r.name === name) : undefined;
  const whose = fromProps ? " (the binding's props.rule, as the call names none)" : "";
  if (!rule) throw new TypeError(`${method}: no rule named ${JSON.stringify(name)}${whose} in RATE_LIMIT_RULES; its rules are ${names}`);
  return rule;
}
