/** The strict path: each decision made by the key's Durable Object, concurrent requests coalesced. */
import { largestCost, type Decision, type Policy } from "../algorithms";
import { policyOf } from "../config/policy";
import type { Rule } from "../config/types";
import { objectErrorKind } from "../durable-object/errors";
import type { Decided } from "../durable-object/rate-limiter";
import { limiterStub, namespaceTag, trackedName } from "../durable-object/stub";
import type { Env } from "../env";
import { countError } from "../metrics/log";
import { metrics, observeWait } from "../metrics/metrics";
import { BreakerOpenError, Breakers, ruleBreaker } from "./breaker";
import { Coalescer, QueueFullError } from "./coalescer";
import { DenialCache } from "./denials";
import { LastAnswers } from "./last-answers";
import type { Share } from "../limiter/local-share";
import { TimeoutError, withTimeout } from "./timeout";
import { admittedUnsent, carried, forgetUnsent, uncountedUnits, type Unsent } from "./unsent";

const coalescer = new Coalescer();
const breakers = new Breakers();
const denials = new DenialCache();
const answers = new LastAnswers();

/** A strict decision; `countedAt` when the object took units, for a refund to find them. */
export interface StrictDecision {
  decision: Decision;
  countedAt?: number;
  /** a fast admission: when its units were spent from the lease (or admitted by onError), for a refund to find their slot */
  spentAt?: number;
  /** an onError admission of a strict key: what its object's late answer and the request's give-backs must agree on */
  late?: LateUnits;
}

/**
 * A strict call its request stopped waiting for, which onError answered: the units the request
 * gave back (all of them when refused; when admitted, what another rule's denial returned) before
 * the object's late answer landed, and where that answer counted its units once it has. Whichever
 * comes second gives them back at the object.
 */
export interface LateUnits {
  givenBack: number;
  countedAt?: number;
  /** when onError admitted the request */
  admittedAt?: number;
  /** the admission, while the object has not counted it (see ./unsent) */
  unsent?: Unsent;
  /** a failed call turned the request out of its key's line here: no call carried it */
  turnedAway?: true;
}

/**
 * This isolate's denial of the key for a request of `cost`, while the object's last denial holds
 * (see {@link DenialCache}); undefined when only the object can tell. A cost the rule can never
 * admit is said to be so, told to wait a period, as the object would (but under a block, which
 * denies every request until it ends).
 */
export function cachedStrictDenial(namespace: Env["LIMITER"], rule: Rule, objectName: string, cost: number, now: number): Decision | undefined {
  return cachedDenialOf(trackedName(namespace, objectName), rule, cost, now);
}

/** {@link cachedStrictDenial} of the object as `trackedName` names it. */
function cachedDenialOf(object: string, rule: Rule, cost: number, now: number): Decision | undefined {
  const cached = denials.lookup(object, cost, now, policyOf(rule));
  if (!cached || cost <= largestCost(rule) || denials.blocks(object)) return cached;
  return { ...cached, retryAfter: rule.periodMs, reason: "cost-exceeds-capacity" };
}

/** Forgets this isolate's cached denial of a key whose object was reset, what its object last said, and what onError admitted that it never counted. */
export function forgetStrict(namespace: Env["LIMITER"], objectName: string): void {
  const object = trackedName(namespace, objectName);
  denials.forget(object);
  answers.forget(object);
  forgetUnsent(object);
}

/** What `onError: "local"` starts a strict key's counters from: its object's last answer here (see {@link LastAnswers}). */
export function strictShare(namespace: Env["LIMITER"], rule: Rule, objectName: string): Share {
  const policy = policyOf(rule);
  const object = trackedName(namespace, objectName);
  const share = answers.shareOf(rule.name, policy, object, Date.now());
  if (!share.apart) return share;
  // Since that answer, the object may admit the requests still waiting on the call in flight, and
  // counts what onError admitted here that it has not yet: none of it is the local count's to give.
  return { ...share, free: Math.max(0, share.free - coalescer.pendingUnits(object, policy) - uncountedUnits(object)) };
}

/**
 * Asks the named object to decide one request, batched with concurrent requests for the same key
 * when there is a `waitUntil` to keep the batch alive;
 * a request the object just denied is denied again from {@link cachedStrictDenial}, with no call.
 * Rejects with a TimeoutError when no decision comes within the rule's timeout, with a
 * QueueFullError at once when too many requests already wait on the key in this isolate (see
 * {@link Coalescer}), with the object's error when it fails (never retried), and at once while the
 * object's breaker, or the rule's, is open after failures in a row or an overloaded object (see
 * {@link Breakers} and {@link ruleBreaker}).
 */
export async function decideStrict(
  namespace: Env["LIMITER"],
  objectName: string,
  rule: Rule,
  cost: number,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
  lateUnits: LateUnits = { givenBack: 0 },
): Promise<StrictDecision> {
  const now = Date.now();
  const object = trackedName(namespace, objectName);
  const asked = denials.mark();
  const cached = cachedDenialOf(object, rule, cost, now);
  if (cached) return { decision: cached };
  const wholeRule = ruleBreaker(rule.name, namespaceTag(namespace));
  const wait = Math.max(breakers.waitFor(object, now), wholeRule.waitFor(now));
  if (wait > 0) throw new BreakerOpenError(`object unavailable; next attempt in ${wait}ms`);
  // Lines are the object's, by its tracked name: a batch is sent through its sender's namespace
  // (lined up by name alone, a request was decided at the other namespace's object).
  // Each call carries what onError admitted here that the object never counted (see ./unsent).
  const call = (_object: string, policy: Policy, costs: number[]) => {
    metrics.count("floodgate_durable_object_calls_total", { method: "decide" });
    const unsent = carried(object);
    const decided = limiterStub(namespace, objectName).decide(policy, costs, unsent.entries.map(({ at, units }) => ({ at, units })));
    void decided.then(() => unsent.answered(false), () => unsent.answered(true));
    return decided;
  };
  const late = (decided: Decided) => undoLate(namespace, objectName, rule, cost, decided, lateUnits);
  try {
    const policy = policyOf(rule);
    // A batch outlives the request that sends it only through waitUntil; without one, each request calls alone.
    const decided = waitUntil
      ? await coalescer.decide(call, object, policy, cost, { timeoutMs: rule.timeoutMs, waitUntil, late, turnedAway: () => (lateUnits.turnedAway = true) })
      : await alone(call(objectName, policy, [cost]).then((all) => all[0]!), rule.timeoutMs, late);
    observeWait(rule, now);
    const answeredAt = Date.now();
    answers.heard(rule.name, policy, object, decided.decision, answeredAt);
    breakers.succeeded(object, answeredAt);
    wholeRule.succeeded(answeredAt);
    // A concurrency slot comes back whenever some response ends: its denial is remembered only for its
    // retryAfter (a second at most) and forgotten when this isolate gives a slot of the key back
    // (refundStrict), so a slot freed elsewhere is seen at most that late, as the 429 said; asked
    // each time, a client holding its slots made every request a decide and a refund under each other rule.
    // An admission took units: the waits remembered for costlier requests were said before it, and may now be short.
    if (decided.decision.allowed) denials.forget(object);
    else denials.remember(object, cost, decided.decision, answeredAt, policy, asked);
    return decided;
  } catch (error) {
    // A full queue says this isolate asks faster than the object answers, not that the object fails.
    if (error instanceof QueueFullError) throw error;
    observeWait(rule, now);
    // A retryable error is not retried: a decide consumes units, and the runtime has already retried
    // every call it knew had not reached the object, so this one may have been applied.
    if (objectErrorKind(error) === "overloaded") breakers.overloaded(object, rule.timeoutMs, Date.now());
    else breakers.failed(object, rule.timeoutMs, Date.now(), error);
    wholeRule.failed(object, rule.timeoutMs, Date.now());
    throw error;
  }
}

/**
 * Notes that onError admitted a strict request at `now`, for its object's late answer and its
 * give-backs; one its object will never decide (it ran out of time in its key's line here, a
 * full line or an open breaker turned it away, or an overloaded object's failure turned it out of
 * the line with the call ahead of it) is kept for the key's next call to carry there (see
 * ./unsent). A concurrency slot is the local fallback's alone: its request's end gives it back here.
 */
export function admittedOnError(namespace: Env["LIMITER"], rule: Rule, objectName: string, cost: number, error: unknown, late: LateUnits, now: number): void {
  late.admittedAt = now;
  const neverSent = late.turnedAway || error instanceof QueueFullError || error instanceof BreakerOpenError || (error instanceof TimeoutError && error.unsent);
  if (neverSent && rule.algorithm !== "concurrency") late.unsent = admittedUnsent(trackedName(namespace, objectName), policyOf(rule), cost, now);
}

/** A call made for one request alone, within `timeoutMs`; its answer, if it comes later, goes to `late`. */
function alone(call: Promise<Decided>, timeoutMs: number, late: (decided: Decided) => Promise<void>): Promise<Decided> {
  return withTimeout(call, timeoutMs).catch((error: unknown) => {
    if (error instanceof TimeoutError) void call.then(late, () => undefined);
    throw error;
  });
}

/**
 * What the object admitted for a request that had stopped waiting, and that onError answered:
 * given back when nothing else ever would. A concurrency slot, since only its request's end gives
 * it back, and that end goes to the local fallback: held a whole `slotTtl`, it kept a key whose
 * object had been slow locked out for a minute after it recovered (an admission by onError is then
 * at the object what it is when the call fails before it is applied: not counted there). Otherwise
 * what the request gave back (`lateUnits`): all of a request onError refused (`deny`, or `local` at
 * a cold start or past its share), and of one `local` or `allow` admitted what another rule's
 * denial returned. The rest stays counted, as an outage counts more, never less; kept, a request
 * that never reached the origin spent the key's quota.
 */
function undoLate(namespace: Env["LIMITER"], objectName: string, rule: Rule, cost: number, { decision, countedAt }: Decided, lateUnits: LateUnits): Promise<void> {
  if (!decision.allowed) {
    // Admitted here and denied there: the object counts it with the key's next call.
    const admitted = cost - lateUnits.givenBack;
    if (admitted > 0 && lateUnits.admittedAt !== undefined && rule.algorithm !== "concurrency") lateUnits.unsent = admittedUnsent(trackedName(namespace, objectName), policyOf(rule), admitted, lateUnits.admittedAt);
    return Promise.resolve();
  }
  const units = rule.algorithm === "concurrency" ? cost : lateUnits.givenBack;
  lateUnits.countedAt = countedAt;
  if (units <= 0) return Promise.resolve();
  return refundStrict(namespace, objectName, rule, units, countedAt).catch(countError("refund", rule));
}

/**
 * Gives back what a request took at the named object, when another rule denied it. This isolate's
 * cached denial of the key goes too, and none is remembered until the refund has landed (see
 * {@link DenialCache.givingBack}): it was true only while those units were counted (a burst whose
 * concurrency rule denied most of it left the rate rule's denial cached for a whole period while
 * its object had room). Rejects like any call past the
 * rule's timeout (the refund may still land): a request that gives units back before it answers
 * (a hold refused past its deadline, a client gone while held) waited on a slow object's queue.
 */
export async function refundStrict(
  namespace: Env["LIMITER"],
  objectName: string,
  rule: Rule,
  units: number,
  countedAt: number,
): Promise<void> {
  metrics.count("floodgate_durable_object_calls_total", { method: "refund" });
  const landed = denials.givingBack(trackedName(namespace, objectName));
  const refund = limiterStub(namespace, objectName).refund(policyOf(rule), units, countedAt);
  void refund.then(landed, landed);
  await withTimeout(refund, rule.timeoutMs);
}

/**
 * Takes `units` more at the named object for a request it admitted (see `charge` on LimitResult),
 * within the rule's timeout; resolves with when the object counted them. Rejects like any call; a
 * denial cached here stays true: a charge only takes.
 */
export function chargeStrict(namespace: Env["LIMITER"], objectName: string, rule: Rule, units: number): Promise<number> {
  metrics.count("floodgate_durable_object_calls_total", { method: "charge" });
  return withTimeout(limiterStub(namespace, objectName).charge(policyOf(rule), units), rule.timeoutMs);
}

/**
 * Moves a concurrency request's slots at the named object to `to`, finding them at exactly one of
 * the times in `from`; resolves with `to`, or 0 when the object no longer held them. Rejects like
 * any call past the rule's timeout.
 */
export async function renewStrict(namespace: Env["LIMITER"], objectName: string, rule: Rule, units: number, from: number[], to: number): Promise<number> {
  metrics.count("floodgate_durable_object_calls_total", { method: "renew" });
  return withTimeout(limiterStub(namespace, objectName).renew(policyOf(rule), units, from, to), rule.timeoutMs);
}
