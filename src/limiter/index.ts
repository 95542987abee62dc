/** This rule, this key, this cost → a Decision: the one core every surface (proxy, binding, library, middleware) decides with. */
import { decide as decideAlgorithm, largestCost, peek as peekAlgorithm, type Decision } from "../algorithms";
import { ruleForKey } from "../config/overrides";
import { policyOf } from "../config/policy";
import type { Rule } from "../config/types";
import { limiterStub, trackedName } from "../durable-object/stub";
import type { Env } from "../env";
import { admittedWithoutLease, cachedFastDenial, decideFast, forgetLocal, peekFastReported, refundFast, shareOf, unadmitFast, type FastContext } from "../fast";
import { waitHold } from "./hold";
import { admitKey, keyAsPeeked } from "./new-keys";
import { forgetFallback, onErrorDecision, releaseLocal } from "./on-error";
import { releaseOf, type Release } from "./release";
import { chargeOf, type Charge } from "./charge";
import { settleOf, type Settle } from "./settle";
import { keyHash, recordDecision, type AnalyticsSettings } from "../metrics/analytics";
import { countError, log } from "../metrics/log";
import { metrics } from "../metrics/metrics";
import { durableObjectName } from "../routing/key";
import { admittedOnError, cachedStrictDenial, decideStrict, forgetStrict, refundStrict, strictShare, type LateUnits, type StrictDecision } from "../strict";
import { unsentGivenBack } from "../strict/unsent";
import { BreakerOpenError } from "../strict/breaker";
import { QueueFullError } from "../strict/coalescer";
import { withTimeout } from "../strict/timeout";
import { LruTable } from "../fast/table";
import { CONTINENT_CODE, LOCATION_CODE, type Whereabouts } from "../fast/relay";

/**
 * Where decisions are made: the RateLimiter namespace, and the request's `waitUntil`, which keeps
 * background work (fast syncs, refunds, a batch other requests wait on) alive past the response.
 * Without it, strict calls are made one by one rather than batched, and fast rules cannot run.
 */
export interface LimiterContext extends Whereabouts {
  namespace: Env["LIMITER"];
  waitUntil?: (promise: Promise<unknown>) => void;
  /** the `ANALYTICS` dataset and its settings, when bound */
  analytics?: AnalyticsSettings;
  /** `ANALYTICS_HASH_KEY`: keys in log lines are hashed under it when it is set */
  hashKey?: string;
}

/**
 * The context with where the request it serves comes from, as far as Cloudflare says (`request.cf.colo`,
 * `request.cf.continent`): a value of another shape (a `cf` a calling Worker set) names no relay, as
 * the binding refuses it.
 */
export function locatedAt(context: LimiterContext, request: Request): LimiterContext {
  const cf = request.cf as { colo?: unknown; continent?: unknown } | undefined;
  const given = (value: unknown, known: string | undefined, shape: RegExp) => (known === undefined && typeof value === "string" && shape.test(value) ? value : undefined);
  const location = given(cf?.colo, context.location, LOCATION_CODE);
  const continent = given(cf?.continent, context.continent, CONTINENT_CODE);
  return location === undefined && continent === undefined ? context : { ...context, ...(location ? { location } : {}), ...(continent ? { continent } : {}) };
}

/** The context of a request to the floodgate Worker (the proxy or the binding), with what its settings record decisions to. */
export function workerContext(namespace: Env["LIMITER"], ctx: Pick<ExecutionContext, "waitUntil">, settings: { analytics?: AnalyticsSettings; hashKey?: string }): LimiterContext {
  const { analytics, hashKey } = settings;
  return { namespace, waitUntil: (promise) => ctx.waitUntil(promise), ...(analytics ? { analytics } : {}), ...(hashKey ? { hashKey } : {}) };
}

/** One rule asked about one key: the key counted (the key, or `#overflow`: see {@link Owner}), the object that owns it and the units the request costs. */
export interface Ask {
  rule: Rule;
  key: string;
  objectName: string;
  cost: number;
}

/** A decision, and for a strict one that took units, when the object counted them. */
export type Taken = StrictDecision;

/**
 * A key's object and the rule it is decided under there: the rule, or with the key's override (its
 * `overrides`) in place of its quota; and the key counted there, the key itself or `#overflow`, which
 * is the key its decisions are logged and recorded under.
 */
export interface Owner {
  rule: Rule;
  key: string;
  objectName: string;
}

/**
 * The object that owns `key` under `rule`, `<rule>/<key>` (hashed past 1 KB), or the rule's
 * `#overflow` key when the key is new to this isolate past the rule's `newKeysPerSecond`; with
 * the rule as that key's override has it.
 */
export function ownerOf(rule: Rule, key: string, now: number): Promise<Owner> {
  return owner(rule, admitKey(rule, key, now));
}

/** The owner a one-unit request for `key` would be counted at now, as {@link ownerOf} finds it but tracking no new key: what a peek reads. */
export function peekedOwnerOf(rule: Rule, key: string, now: number): Promise<Owner> {
  return owner(rule, keyAsPeeked(rule, key, now));
}

async function owner(rule: Rule, counted: string): Promise<Owner> {
  return { rule: ruleForKey(rule, counted), key: counted, objectName: await durableObjectName(rule.name, counted) };
}

/** This isolate's cached denial of the ask, when it has one: no call is needed to know it. */
export function cachedDenial(ask: Ask, context: LimiterContext, now: number): Decision | undefined {
  if (ask.rule.mode === "strict") return cachedStrictDenial(context.namespace, ask.rule, ask.objectName, ask.cost, now);
  return context.waitUntil ? cachedFastDenial(fastContext(context), ask.rule, ask.objectName, ask.cost, now) : undefined;
}

/** One rule's decision by its mode; when the object fails or is too slow, by its `onError` policy. */
export async function decide(ask: Ask, context: LimiterContext): Promise<Taken> {
  const { rule, objectName, cost } = ask;
  if (cost > largestCost(rule)) return { decision: await beyondCapacity(ask, context) };
  // A fast rule without a context is the caller's mistake, not the object's failure: it throws.
  const fast = rule.mode === "fast" ? fastContext(context) : undefined;
  const late: LateUnits = { givenBack: 0 };
  try {
    if (fast) return { decision: await decideFast(fast, rule, objectName, cost), spentAt: Date.now() };
    return await decideStrict(context.namespace, objectName, rule, cost, context.waitUntil, late);
  } catch (error) {
    // A request turned away by a full queue is this isolate asking faster than the object answers, not a failing object.
    const kind = error instanceof QueueFullError ? "queue_full" : "durable_object";
    // A request an open breaker turned away is counted; the breaker's own line tells of it.
    if (error instanceof BreakerOpenError) metrics.count("floodgate_errors_total", { kind });
    else countError(kind, rule)(error);
    const now = Date.now();
    const decision = onErrorDecision(rule, trackedName(context.namespace, objectName), cost, rule.mode === "fast" ? shareOf(context.namespace, objectName, now) : strictShare(context.namespace, rule, objectName), now);
    if (!decision.allowed) {
      // A refused request took nothing: what its object's late answer counts goes back (see undoLate), whatever refused it (deny, or local at a cold start or past its share).
      late.givenBack = cost;
      return { decision };
    }
    if (!fast) {
      admittedOnError(context.namespace, rule, objectName, cost, error, late, now);
      return { decision, late };
    }
    admittedWithoutLease(context.namespace, rule, objectName, cost, now);
    return { decision, spentAt: now };
  }
}

/**
 * The denial of a cost the rule can never grant, which no algorithm admits whatever the key's
 * state (told to wait a period), when this isolate knows nothing of the key: its figures come from
 * the object, read without consuming (a key under a block is denied as blocked); as a key never
 * used when the object cannot say within the rule's timeout.
 */
async function beyondCapacity(ask: Ask, context: LimiterContext): Promise<Decision> {
  const { rule, objectName, cost } = ask;
  const now = Date.now();
  const tracked = trackedName(context.namespace, objectName);
  const seen = capacityViews.get(tracked);
  if (seen && now - seen.at < CAPACITY_VIEW_MS) return asOf(seen.decision, seen.at, now);
  const known = await readStanding(ask, context);
  if (!known) return decideAlgorithm(policyOf(rule), undefined, cost, Date.now()).decision;
  const decision: Decision = known.reason === "blocked" ? known : { ...known, allowed: false, retryAfter: rule.periodMs, reason: "cost-exceeds-capacity" };
  capacityViews.set(tracked, { at: now, decision });
  return decision;
}

/** The key's standing from its object within the rule's timeout; undefined, the failure counted and logged, when it cannot say. */
async function readStanding({ rule, objectName }: Ask, context: LimiterContext): Promise<Decision | undefined> {
  try {
    return await standing(context.namespace, rule, objectName);
  } catch (error) {
    countError("peek", rule)(error);
    return undefined;
  }
}

/**
 * Figures read at `at`, as they stand at `now`: a block's wait counts down (a period's is a period
 * whenever it is read), and times already past are now.
 */
function asOf(decision: Decision, at: number, now: number): Decision {
  const retryAfter = decision.reason === "blocked" ? Math.max(1, decision.retryAfter - (now - at)) : decision.retryAfter;
  return { ...decision, resetAt: Math.max(now, decision.resetAt), moreAt: Math.max(now, decision.moreAt), retryAfter };
}

/**
 * How long a key's figures read for a cost beyond capacity answer the next such requests: an
 * oversized cost header then costs at most one read a second per key per isolate, where each
 * request read the object (figures at most this stale are good enough for a request that can
 * never pass).
 */
const CAPACITY_VIEW_MS = 1_000;
/** by the key's tracked name (`trackedName`): another namespace's object of that name has figures of its own */
const capacityViews = new LruTable<{ at: number; decision: Decision }>(1_000, () => undefined);

/**
 * Returns what an allowed decision took: when another rule denied the request, and a concurrency
 * rule's slots once the request is over (see ./release). Resolves once they are back; a failure
 * is counted, never thrown.
 */
export function giveBack(ask: Ask, taken: Taken, context: LimiterContext, units = ask.cost): Promise<void> {
  const { decision } = taken;
  const back = Math.min(units, unreturned(ask, taken));
  if (!decision.allowed || back <= 0) return Promise.resolve();
  returned.set(taken, (returned.get(taken) ?? 0) + back);
  if (decision.reason === "error") {
    if (ask.rule.algorithm === "concurrency" && ask.rule.onError === "local") releaseLocal(ask.rule, trackedName(context.namespace, ask.objectName), back, Date.now());
    if (ask.rule.mode === "fast") unadmitFast(context.namespace, ask.objectName, back, taken.spentAt ?? Date.now());
    // The object's late answer may have taken them too (a concurrency slot it gives back itself, see undoLate).
    const { late } = taken;
    if (!late || ask.rule.algorithm === "concurrency") return Promise.resolve();
    late.givenBack += back;
    // Never counted at the object: given back here, or refunded there once a call has carried it.
    if (late.unsent) {
      const { at } = late.unsent;
      const carriedBack = unsentGivenBack(late.unsent, back);
      return carriedBack > 0 ? refundAt(ask, carriedBack, { countedAt: at }, context) : Promise.resolve();
    }
    return late.countedAt === undefined ? Promise.resolve() : refundAt(ask, back, { countedAt: late.countedAt }, context);
  }
  return refundAt(ask, back, taken, context);
}

/**
 * Gives `units` back where they were counted: at a strict key's object, in the window of
 * `countedAt`; to a fast key's lease, in the slot of `spentAt` (when neither is known, now).
 * Resolves once they are back; a failure is counted, never thrown.
 */
export function refundAt(ask: Ask, units: number, { countedAt, spentAt }: Pick<Taken, "countedAt" | "spentAt">, context: LimiterContext): Promise<void> {
  if (countedAt === undefined) return Promise.resolve(refundFast(context.namespace, ask.objectName, units, spentAt ?? Date.now()));
  const refund = refundStrict(context.namespace, ask.objectName, ask.rule, units, countedAt).catch(countError("refund", ask.rule));
  context.waitUntil?.(refund);
  return refund;
}

/**
 * Units of each admission given back so far: however many ways they come back (another rule's
 * denial, `settle`, a negative `charge`), an admission never gives back more than it took.
 */
const returned = new WeakMap<Taken, number>();

/** Units of the admission not yet given back. */
export function unreturned(ask: Ask, taken: Taken): number {
  return ask.cost - (returned.get(taken) ?? 0);
}

/** A decision, and when it took concurrency slots, the one way to give them back. */
export interface Held {
  /** the rule the key was decided under: the rule given, or with the key's override in place of its quota */
  rule: Rule;
  decision: Decision;
  release?: Release;
  /** gives back what an admission took, as the proxy does when another rule denies the request (concurrency slots come back through `release`) */
  refund: () => Promise<void>;
  /** when the rule counts by response (its `count`): gives the units back if the request ended as the rule does not count */
  settle?: Settle;
  /** when a rule of units (not concurrency) admitted the request: corrects what it is counted at once its real cost is known */
  charge?: Charge;
}

/**
 * Decides `cost` units for `key` under `rule`: from this isolate's cached denial when it has one,
 * otherwise by the rule's mode, and counted in the metrics. The whole of `limit` for the binding,
 * the library and the middleware. A decision that holds the request (gcra's `delay`) resolves
 * once the hold is over; if `signal` aborts first, the units are given back, then this rejects
 * with the signal's reason. A hold that would end after `holdsUntil` is not waited: the units go
 * back, and the answer is a denial told to come back when the hold would have ended. An admission
 * under a concurrency rule comes with its `release`. A denial `waitsOut` says the caller will wait
 * out and ask again about (`blockUntilReady`) is not counted.
 */
export async function limitKey(
  context: LimiterContext,
  rule: Rule,
  key: string,
  cost: number,
  signal?: AbortSignal,
  holdsUntil = Number.POSITIVE_INFINITY,
  waitsOut: (decision: Decision, rule: Rule) => boolean = () => false,
): Promise<Held> {
  const now = Date.now();
  const ask: Ask = { ...(await ownerOf(rule, key, now)), cost };
  if (ask.rule.unlimited) {
    countUnlimited(ask.rule);
    return { rule: ask.rule, decision: unlimited(ask.rule, now), refund: () => Promise.resolve() };
  }
  const cached = cachedDenial(ask, context, now);
  const decided = cached ? { decision: cached } : await decide(ask, context);
  const holdMs = decided.decision.allowed && !rule.dryRun ? (decided.decision.holdMs ?? 0) : 0;
  const heldTooLong = holdMs > 0 && Date.now() + holdMs > holdsUntil;
  if (heldTooLong) await giveBack(ask, decided, context);
  const taken: Taken = heldTooLong ? { decision: holdRefused(decided.decision, cost, holdMs) } : decided;
  // A denial the caller waits out and asks again about is not an answer: only the one it gets is counted.
  if (!waitsOut(taken.decision, ask.rule)) countDecision(ask, taken.decision, context);
  const refund = () => (rule.algorithm === "concurrency" ? Promise.resolve() : giveBack(ask, taken, context));
  if (await waitHold([{ rule: ask.rule, decision: taken.decision }], signal)) return { rule: ask.rule, decision: await asReleased(ask, taken.decision, context), refund, ...releaseOf([{ ask, taken }], context), ...settleOf([{ ask, taken }], context), ...chargeOf(ask, taken, context) };
  // Given back before rejecting, so a caller that retries at once finds the units free.
  await giveBack(ask, taken, context);
  throw signal!.reason;
}

/** Counts a request of a key its rule's overrides leave unlimited, which the rule sat out: the one trace it leaves. */
export function countUnlimited(rule: Rule): void {
  metrics.count("floodgate_decisions_total", { rule: rule.name, decision: "unlimited" });
}

/** What a key its override leaves unlimited is told: admitted, nothing counted, its rule's quota whole. */
function unlimited(rule: Rule, now: number): Decision {
  return peekAlgorithm(policyOf(rule), undefined, now);
}

/**
 * An admission whose hold would outlast the caller's deadline, as a denial told to come back when the hold would have
 * ended: its units are back, yet it says fewer than the request asked for, as every denial does. One onError decided
 * (the object failed) stays onError's: `error`, as its metrics and logs say.
 */
function holdRefused(admitted: Decision, cost: number, holdMs: number): Decision {
  const reason = admitted.reason === "error" ? "error" : "limit";
  return { ...admitted, allowed: false, holdMs: undefined, remaining: Math.min(admitted.remaining + cost, cost - 1), retryAfter: holdMs, reason };
}

/**
 * An admission that a hold delayed (gcra's `delay`), as its key stands once the hold is over: the
 * object's standing then, consuming nothing, so that what a response says of the key is true when
 * it is sent, not when the request was admitted (requests were decided and units came back
 * meanwhile). The admission as it was when the object cannot say within the rule's timeout.
 */
export async function asReleased(ask: Ask, decision: Decision, context: LimiterContext): Promise<Decision> {
  if (!decision.allowed || !decision.holdMs) return decision;
  const now = await readStanding(ask, context);
  return now ? { allowed: true, limit: now.limit, remaining: now.remaining, resetAt: now.resetAt, moreAt: now.moreAt, retryAfter: 0 } : decision;
}

/**
 * The key's standing as a one-unit request would find it now, consuming nothing: for a fast key,
 * what this isolate would answer from its lease or its denial (a `limit` now would get that), once
 * it has reported an ended lease the object still counts; the object's standing otherwise. What
 * `peek` answers, on the binding and the library. A peek needs no `waitUntil`: it awaits its sync.
 * It rejects with a TimeoutError past the rule's `timeout` (one for the sync and the read), as a `limit` would stop waiting: a slow
 * object has no onError answer for a peek, and must not hold its caller for as long as it is slow.
 */
export async function peekKey(context: LimiterContext, rule: Rule, objectName: string): Promise<Decision> {
  const started = Date.now();
  if (rule.unlimited) return unlimited(rule, started);
  const fast = rule.mode === "fast" ? await peekFastReported(fastContext({ ...context, waitUntil: context.waitUntil ?? (() => undefined) }), rule, objectName) : undefined;
  // One timeout for the whole peek: a fast key's sync may have spent some of it, or all.
  return fast ?? standing(context.namespace, rule, objectName, Math.max(0, rule.timeoutMs - (Date.now() - started)));
}

/**
 * The key's standing from its object, consuming nothing: `allowed` and `retryAfter` for one unit;
 * for a key its override leaves unlimited, the rule's whole quota, whatever its object still holds.
 * Rejects with a TimeoutError past `budgetMs` (the rule's timeout unless told): every reader, the
 * admin API's included, stops waiting on a slow object when a request would.
 */
export async function standing(namespace: Env["LIMITER"], rule: Rule, objectName: string, budgetMs = rule.timeoutMs): Promise<Decision> {
  if (rule.unlimited) return unlimited(rule, Date.now());
  metrics.count("floodgate_durable_object_calls_total", { method: "peek" });
  return withTimeout(limiterStub(namespace, objectName).peek(policyOf(rule)), budgetMs, rule.timeoutMs);
}

/**
 * Forgets the key: its object, and this isolate's lease, cached denial and local fallback counters of it.
 * Rejects with a TimeoutError past the rule's timeout, as {@link standing} does; the reset may still
 * land then, and this isolate keeps what it knows of the key until it does, as other isolates do.
 */
export async function forget(namespace: Env["LIMITER"], rule: Rule, objectName: string): Promise<void> {
  metrics.count("floodgate_durable_object_calls_total", { method: "reset" });
  await withTimeout(limiterStub(namespace, objectName).reset(), rule.timeoutMs);
  // Other isolates keep their leases and denials until these run out (at most ten sync intervals, or a strict denial's retryAfter).
  forgetLocal(namespace, objectName);
  forgetStrict(namespace, objectName);
  const tracked = trackedName(namespace, objectName);
  forgetFallback(tracked);
  capacityViews.delete(tracked);
}

/**
 * Counts a decision in `floodgate_decisions_total` (`allowed`, `denied`, or for a dry-run rule's
 * would-be denial `dry_run_denied`), writes its Analytics Engine point when the dataset is bound,
 * and logs each denial and would-be denial as one JSON line (capped per second, see ../metrics/log)
 * with the key only as its hash.
 */
export function countDecision(ask: Pick<Ask, "rule" | "key" | "cost">, decision: CountedDecision, context: LimiterContext): void {
  const { rule, key, cost } = ask;
  const outcome = decision.allowed ? "allowed" : rule.dryRun ? "dry_run_denied" : "denied";
  metrics.count("floodgate_decisions_total", { rule: rule.name, decision: outcome });
  if (context.analytics && context.waitUntil) recordDecision(context.analytics, { rule, decision, key, cost, outcome }, context.waitUntil);
  if (outcome === "allowed") return;
  const write = log.admit(outcome, Date.now());
  if (!write) return;
  const status = decision.reason === "invalid-request" ? 400 : (rule.denyResponse?.status ?? 429);
  const line = { rule: rule.name, decision: outcome, reason: decision.reason ?? "limit", retryAfterMs: decision.retryAfter, ...(outcome === "denied" ? { status } : {}) };
  // Hashing may fail like any I/O; a log line never costs the request anything.
  const logged = keyHash(context.hashKey, key).then((hash) => write({ ...line, keyHash: hash }), () => write(line));
  context.waitUntil?.(logged);
}

/** A decision as counted: a rule's 400 for a malformed cost says "invalid-request", which no decision of a limit says. */
export type CountedDecision = Omit<Decision, "reason"> & { reason?: Decision["reason"] | "invalid-request" };

/**
 * A rule's refusal of a request whose cost header is malformed for it: counted as {@link
 * countDecision} counts a denial (a dry-run rule's would-be denial), with its point and its log line
 * (status 400) with the key's hash, reason "invalid-request" and no cost. No object is asked.
 */
export function countRefusal(ask: Pick<Ask, "rule" | "key">, context: LimiterContext): void {
  const now = Date.now();
  const refusal = { allowed: false, limit: ask.rule.limit, remaining: 0, resetAt: now, moreAt: now, retryAfter: 0, reason: "invalid-request" as const };
  countDecision({ ...ask, cost: 0 }, refusal, context);
}

/** The context a fast rule decides in: it needs `waitUntil` for its background syncs, or throws. */
export function fastContext(context: LimiterContext): FastContext {
  const { namespace, waitUntil, location, continent } = context;
  if (!waitUntil) throw new TypeError("a fast rule needs the request's ExecutionContext (ctx) for its background syncs");
  return { namespace, waitUntil, ...(location !== undefined ? { location } : {}), ...(continent !== undefined ? { continent } : {}) };
}

