/** The fast path: decisions made in the isolate from leased units, reconciled with the key's object in the background. */
import { largestCost, mayAdmitMore, type Decision } from "../algorithms";
import type { Rule } from "../config/types";
import { retriedOnce } from "../durable-object/errors";
import { limiterStub, namespaceTag, trackedName as tracked } from "../durable-object/stub";
import type { Env } from "../env";
import { ALONE, type Share } from "../limiter/local-share";
import { countError } from "../metrics/log";
import { metrics, observeWait } from "../metrics/metrics";
import { policyOf } from "../config/policy";
import { BreakerOpenError, ruleBreaker } from "../strict/breaker";
import { TimeoutError, withTimeout } from "../strict/timeout";
import type { Lease, SyncRequest } from "./lease";
import { firstThroughRelay, relayFor, syncsThrough, type Whereabouts } from "./relay";
import {
  admittedUnleased,
  applyLease,
  beyondCapacity,
  blockedAnyway,
  chargeLocally,
  decideLocally,
  deniedLocally,
  forgetDenial,
  freshKey,
  fromLease,
  hasPending,
  knownShare,
  localPeek,
  nextSync,
  refundLocally,
  surrender,
  syncFailed,
  unadmitUnleased,
  unchargeLocally,
  type LocalKey,
  type Sender,
} from "./local";
import { endLots, leaseLeft } from "./lots";
import { callOnTime, ON_TIME_CALL_MAX_MS, ON_TIME_CALL_WITHIN_MS, onTimeCallAt, releasable, syncDue, type OnTimeChain } from "./sync-timing";
import { DEFAULT_MAX_KEYS, LruTable } from "./table";

/**
 * Names this isolate to the objects, which keep one lease and one retry cache per isolate. Made on
 * first use: Workers allows no random values at module scope.
 */
let sender: Sender | undefined;
function self(): Sender {
  if (!sender) {
    let seq = 0;
    sender = { isolate: crypto.randomUUID(), nextSeq: () => ++seq };
  }
  return sender;
}

interface Entry {
  rule: Rule;
  objectName: string;
  /** the namespace of the key's object, as its last request passed it: every sync of the entry goes there, one a sweep or a timer starts under another key's request (of another namespace, maybe) too */
  namespace: Env["LIMITER"];
  /** its name in the table, which tells it from a key of another namespace with an object of the same name (an entry by name alone spent one's lease, and its denial, on the other's requests) */
  tracked: string;
  key: LocalKey;
  /** the sync in flight, which waiting requests join rather than start another, and when it began */
  inflight: Promise<void> | null;
  inflightSince: number;
  /** the sync in flight once a request gave up on it: one hung sync is one failure, however many requests wait it out */
  late?: Promise<void>;
  /** the costs of the requests waiting for a sync: the next one asks for all of them, not only its starter's */
  waiting: number[];
  /** a timer will send the charges owed if no sync has by then (see {@link chargeFast}) */
  flushing?: boolean;
  /** pushed out of the table: what it holds goes back to the object (see {@link letGo}) */
  evicted?: boolean;
  /** the rule the object last answered a sync under: its denial holds for that rule's figures and any stricter */
  answeredUnder?: Rule;
}

/** What a fast decision needs from the request it serves. */
export interface FastContext extends Whereabouts {
  namespace: Env["LIMITER"];
  waitUntil(promise: Promise<unknown>): void;
}

/** The number of keys this isolate tracks; FAST_MAX_KEYS changes it. */
export function setCapacity(maxKeys: number | undefined): void {
  table.capacity = maxKeys ?? DEFAULT_MAX_KEYS;
  leaving.capacity = table.capacity;
}

let evicted: Entry[] = [];
/**
 * Evicted keys whose object has not yet answered what they gave back (see {@link letGo}). A key that
 * comes back takes its entry up again rather than a fresh one, so its next sync follows that answer:
 * both carry this isolate's id, and a fresh entry's sync, with a higher seq, overtook a release that
 * was slow on its way (through a relay), which the object then took for a retry and never counted.
 * A release that failed stays, to be sent again (the same seq, applied once) if the key comes back.
 */
const leaving = new LruTable<Entry>(DEFAULT_MAX_KEYS, () => undefined);
const table = new LruTable<Entry>(DEFAULT_MAX_KEYS, (name, entry) => {
  metrics.count("floodgate_key_evictions_total");
  entry.evicted = true;
  if (!hasPending(entry.key)) return;
  evicted.push(entry);
  leaving.set(name, entry);
});
let lastSweep = 0;

/**
 * Decides a request for a fast-mode rule. A key this isolate knows is decided from its lease with
 * no call on the request's path; a background sync returns what went unspent and fetches more
 * once per `sync` interval, or sooner when the lease runs low. Only a key with no lease left and
 * no denial from the object waits for a sync. Throws when the object cannot be reached in time
 * and nothing local can decide; the caller applies the rule's onError policy.
 */
export async function decideFast(context: FastContext, rule: Rule, objectName: string, cost: number): Promise<Decision> {
  const now = Date.now();
  const entry = entryFor(context.namespace, rule, objectName, now);
  flushEvicted(context);
  sweep(context, now);
  const local = decideHere(context, entry, rule, cost, now);
  if (local) return local;
  // After failed syncs the object, or every object of the rule, is left alone until the backoff ends: onError decides at once.
  const wait = Math.max(entry.key.retryAt - now, ruleBreaker(rule.name, namespaceTag(entry.namespace)).waitFor(now));
  if (wait > 0) return blockedOr(entry, rule, cost, new BreakerOpenError(`object unavailable; next attempt in ${wait}ms`));
  entry.waiting.push(cost);
  // One deadline for the decision: a second attempt that had its own waited up to twice the rule's timeout.
  const deadline = now + rule.timeoutMs;
  try {
    for (let attempt = 0; attempt < 2; ) {
      const left = deadline - Date.now();
      // The deadline passed while the first sync did not cover the request: the object was too slow for it, as onError decides.
      if (attempt > 0 && left <= 0) throw new TimeoutError(`no decision within ${rule.timeoutMs}ms`);
      const failure = await withTimeout(sync(context, entry, cost, false, undefined, rule), left).then(
        () => undefined,
        (error: unknown) => {
          if (error instanceof TimeoutError) syncLate(entry, Date.now());
          return error;
        },
      );
      if (failure !== undefined) return blockedOr(entry, rule, cost, failure);
      // Answered under another plan's figures (a sync it joined): a looser plan's grant goes back, a
      // stricter plan's denial says nothing of this request; it asks again under its own, within the
      // deadline, without spending an attempt (another plan's request may switch the entry again).
      const [less, more] = [asksForLess(entry, rule), asksForMore(entry, rule)];
      if (less || more) {
        if (less) endLots(entry.key);
        if (more) forgetDenial(entry.key);
        entry.rule = rule;
        if (deadline - Date.now() <= 0) throw new TimeoutError(`no decision within ${rule.timeoutMs}ms`);
        continue;
      }
      attempt++;
      const decided = fromLease(entry.key, rule, cost, Date.now());
      // Decided by the object's answer to this very request: its denial, not the cache's (a block says so).
      if (decided) return decided.allowed || decided.reason === "blocked" ? decided : { ...decided, reason: "limit" };
    }
  } finally {
    entry.waiting.splice(entry.waiting.indexOf(cost), 1);
    observeWait(rule, now);
    letGo(context, entry);
  }
  // Requests queued behind the same syncs spent their grants first: this one is told to come back.
  return blockedAnyway(entry.key, rule, cost, Date.now()) ?? { allowed: false, limit: rule.limit, remaining: 0, resetAt: now + rule.syncMs, moreAt: now + rule.syncMs, retryAfter: rule.syncMs, reason: "limit" };
}

/**
 * A request the object could not be asked about (see {@link decideFast}): under the key's block,
 * denied as blocked all the same, told the best time the isolate knows (see `blockedAnyway`);
 * otherwise `error` is thrown, for the rule's `onError` to decide.
 */
function blockedOr(entry: Entry, rule: Rule, cost: number, error: unknown): Decision {
  const blocked = blockedAnyway(entry.key, rule, cost, Date.now());
  if (blocked) return blocked;
  throw error;
}

/**
 * This isolate's denial of a fast key for a request of `cost`, while the object's denial holds and
 * the lease cannot pay, made as {@link decideFast} makes it; undefined otherwise.
 */
export function cachedFastDenial(context: FastContext, rule: Rule, objectName: string, cost: number, now: number): Decision | undefined {
  if (cost > largestCost(rule)) return fastBeyondCapacity(context.namespace, rule, objectName, now);
  const entry = table.peek(tracked(context.namespace, objectName));
  if (entry === undefined || asksForMore(entry, rule) || !deniedLocally(entry.key, rule, cost, now)) return undefined;
  return decideHere(context, entry, rule, cost, now);
}

/** What this isolate would answer a one-unit request for a fast key now, from its lease or its denial, counting nothing; undefined when only a sync could tell. */
function peekFast(namespace: Env["LIMITER"], rule: Rule, objectName: string, now: number): Decision | undefined {
  const entry = table.peek(tracked(namespace, objectName));
  return entry && !asksForMore(entry, rule) && !asksForLess(entry, rule) ? localPeek(entry.key, rule, now) : undefined;
}

/**
 * {@link peekFast}, having first told the object what this isolate still holds for the key when
 * that stands between the isolate and a true answer: an ended lease, whose units the object counts
 * as taken until they are reported (a peek just after a fixed window turned said the key was
 * denied for the whole window, where a `limit`, which syncs first, was admitted). The sync is the
 * one call the peek makes; when it fails, undefined: the object's own standing answers.
 */
export async function peekFastReported(context: FastContext, rule: Rule, objectName: string): Promise<Decision | undefined> {
  const local = peekFast(context.namespace, rule, objectName, Date.now());
  const entry = table.peek(tracked(context.namespace, objectName));
  if (local || !entry || (entry.key.reports.length === 0 && entry.key.outbox === null)) return local;
  try {
    await withTimeout(sync(context, entry, 0), rule.timeoutMs);
  } catch {
    return undefined;
  }
  return peekFast(context.namespace, rule, objectName, Date.now());
}

/**
 * The denial of a cost the rule can never admit, as this isolate knows the key (the object's last
 * word and the lease); undefined when it tracks no such key. Tracking starts with a request that
 * could be admitted: such requests say nothing of the key's demand.
 */
function fastBeyondCapacity(namespace: Env["LIMITER"], rule: Rule, objectName: string, now: number): Decision | undefined {
  const entry = table.peek(tracked(namespace, objectName));
  if (!entry?.key.standing) return undefined;
  metrics.count("floodgate_local_decisions_total", { rule: rule.name });
  return beyondCapacity(entry.key, rule, now);
}

/**
 * A decision from the key's lease or its cached denial, with no call on the request's path; the
 * background sync it may be due for still runs, so a denied key hears of freed units on time.
 */
function decideHere(context: FastContext, entry: Entry, rule: Rule, cost: number, now: number): Decision | undefined {
  const local = decideLocally(entry.key, rule, cost, now);
  if (!local) return undefined;
  metrics.count("floodgate_local_decisions_total", { rule: rule.name });
  if (syncDue(entry.key, rule, now)) void inBackground(entry, () => sync(context, entry, 0));
  return local;
}

/** Gives back what a fast decision spent at `spentAt`, when another rule denied the request. */
export function refundFast(namespace: Env["LIMITER"], objectName: string, units: number, spentAt: number): void {
  const entry = table.get(tracked(namespace, objectName));
  if (entry) refundLocally(entry.key, entry.rule, units, spentAt, Date.now());
}

/** Gives back what a fast key's charge at `chargedAt` took (see `unchargeLocally`). */
export function unchargeFast(namespace: Env["LIMITER"], objectName: string, units: number, chargedAt: number): void {
  const entry = table.get(tracked(namespace, objectName));
  if (entry) unchargeLocally(entry.key, entry.rule, units, chargedAt, Date.now());
}

/**
 * Takes `units` more for a request a fast key admitted (see `charge` on LimitResult): from this
 * isolate's lease but for what the requests waiting on a sync need, and the rest owed to the
 * object, which hears of them with the key's next sync, as of a report (see {@link flushOwed}).
 * Returns when they were counted here, for a refund to find their slot; nothing is waited on.
 */
export function chargeFast(context: FastContext, rule: Rule, objectName: string, units: number): number {
  const now = Date.now();
  const entry = entryFor(context.namespace, rule, objectName, now);
  chargeLocally(entry.key, rule, units, now, entry.waiting.reduce((sum, cost) => sum + cost, 0));
  if (entry.key.refunds.length > 0) flushOwed(context, entry);
  return now;
}

/**
 * Sees that charges a key owes reach its object though no request comes to sync it: at its booked
 * call, no sooner than a sync interval (at most ON_TIME_CALL_MAX_MS) from now, and at the latest
 * ON_TIME_CALL_WITHIN_MS after the charge, under its request's `waitUntil`, which Workers grants
 * 30 s; after a sync in flight, which left without them, and once a backoff ends. One timer a key;
 * none for a key no longer in the table (reset: what it owed went with it; evicted: its release
 * sync carries it).
 */
function flushOwed(context: FastContext, entry: Entry): void {
  if (entry.flushing) return;
  entry.flushing = true;
  const until = Date.now() + ON_TIME_CALL_WITHIN_MS;
  const owes = () => table.peek(entry.tracked) === entry && (entry.key.refunds.length > 0 || entry.key.outbox !== null);
  const run = async () => {
    for (let now = Date.now(); now < until && owes(); now = Date.now()) {
      const at = Math.min(until, Math.max(entry.key.nextSyncAt, entry.key.retryAt, now + Math.min(entry.rule.syncMs, ON_TIME_CALL_MAX_MS)));
      await new Promise((resolve) => setTimeout(resolve, at - now));
      if (!owes() || Date.now() < entry.key.retryAt) continue;
      await inBackground(entry, () => sync(context, entry, 0));
    }
  };
  context.waitUntil(run().finally(() => (entry.flushing = false)));
}

/**
 * Notes units the rule's `onError` admitted for a fast key at `now` while its object could not be reached,
 * so that the key's next sync has the object count them: an outage's admissions are not forgotten.
 */
export function admittedWithoutLease(namespace: Env["LIMITER"], rule: Rule, objectName: string, units: number, now: number): void {
  admittedUnleased(entryFor(namespace, rule, objectName, now).key, rule, units, now);
}

/** Gives back what `onError` admitted for a fast key at `admittedAt`, when another rule denied the request (see `unadmitUnleased`). */
export function unadmitFast(namespace: Env["LIMITER"], objectName: string, units: number, admittedAt: number): void {
  const entry = table.get(tracked(namespace, objectName));
  if (entry) unadmitUnleased(entry.key, entry.rule, units, admittedAt, Date.now());
}

/** What this isolate holds for a fast key, as the admin API shows it; undefined if it tracks none. */
export function localView(namespace: Env["LIMITER"], objectName: string): { leased: number; returning: number; blockedUntil: number; lastSyncAt: number } | undefined {
  const key = table.peek(tracked(namespace, objectName))?.key;
  if (!key) return undefined;
  const returning = [...key.reports, ...(key.outbox?.reports ?? [])].reduce((sum, r) => sum + r.unspent, 0);
  return { leased: leaseLeft(key), returning, blockedUntil: key.blockedUntil, lastSyncAt: key.lastSyncAt };
}

/** Drops this isolate's lease and denial for a key whose object was reset. */
export function forgetLocal(namespace: Env["LIMITER"], objectName: string): void {
  const name = tracked(namespace, objectName);
  table.delete(name);
  leaving.delete(name);
}

/** The most isolates any object of each rule (by name) has reported sharing a key with this one. */
const rulePeers = new Map<string, number>();

/** When onError was first asked for each rule none of whose objects has yet answered this isolate. */
const ruleColdSince = new Map<string, number>();

/** This isolate's view of how a fast key is shared, for onError's local share (see {@link knownShare}). */
export function shareOf(namespace: Env["LIMITER"], objectName: string, now: number): Share {
  const entry = table.peek(tracked(namespace, objectName));
  if (!entry) return ALONE;
  const name = entry.rule.name;
  if (!rulePeers.has(name) && !ruleColdSince.has(name)) ruleColdSince.set(name, now);
  return knownShare(entry.key, rulePeers.get(name) ?? 0, now - (ruleColdSince.get(name) ?? now));
}

/**
 * Whether the rule may admit what the object last denied the key under (see `mayAdmitMore`): a
 * plan upgraded under one rule name. Its denial then says nothing of this request, and the object
 * is asked. Under figures as strict or stricter it holds.
 */
function asksForMore(entry: Entry, rule: Rule): boolean {
  const under = entry.answeredUnder;
  return under !== undefined && under !== rule && mayAdmitMore(policyOf(rule), policyOf(under));
}

/**
 * Whether the object last answered the key under figures that may admit more than the rule's (a
 * plan downgraded, or another plan's request on the same key): units leased under them are not
 * this rule's to spend, or a free plan's requests would spend what a pro plan's lease held.
 */
function asksForLess(entry: Entry, rule: Rule): boolean {
  const under = entry.answeredUnder;
  return under !== undefined && under !== rule && mayAdmitMore(policyOf(under), policyOf(rule));
}

function entryFor(namespace: Env["LIMITER"], rule: Rule, objectName: string, now: number): Entry {
  const name = tracked(namespace, objectName);
  const known = table.get(name) ?? takenBack(name);
  // A re-read configuration, or a limiter() made per request, brings a new Rule object: the entry
  // itself stays, since requests in flight hold it (a copy split the sync in flight and the waiting
  // units between copies, and a burst of 300 at a key of 100 was granted 20).
  if (known) {
    if (asksForMore(known, rule)) forgetDenial(known.key);
    // Given back at the next sync, which this request makes: the object answers it under its own figures.
    if (asksForLess(known, rule)) endLots(known.key);
    known.rule = rule;
    known.namespace = namespace;
    return known;
  }
  const entry: Entry = { rule, objectName, namespace, tracked: name, key: freshKey(now, firstThroughRelay(rule)), inflight: null, inflightSince: 0, waiting: [] };
  table.set(name, entry);
  return entry;
}

/** The entry of an evicted key still {@link leaving}, back in the table; undefined when there is none. */
function takenBack(name: string): Entry | undefined {
  const entry = leaving.peek(name);
  if (!entry) return undefined;
  leaving.delete(name);
  entry.evicted = false;
  table.set(name, entry);
  return entry;
}

/**
 * Runs one sync for the key, or joins the one in flight. The sync is handed to `waitUntil`, so it
 * completes even if the request that started it is answered or cancelled; one that has made no
 * progress for two timeouts is presumed lost with its request and replaced (the replacement resends
 * the same unanswered sync, which the object applies once). Its answer may set the timer of the
 * key's booked call (see {@link callWhenBooked}); `chain`: the timers under the request whose
 * `waitUntil` the sync runs under, for a sync a timer makes; `asked`: the rule of the request that
 * waits on it, when not the entry's (another plan's request may have switched it meanwhile).
 */
function sync(context: FastContext, entry: Entry, need: number, release = false, chain: OnTimeChain = { since: Date.now(), calls: 0 }, asked?: Rule): Promise<void> {
  const now = Date.now();
  if (entry.inflight && now - entry.inflightSince <= 2 * entry.rule.timeoutMs) return entry.inflight;
  // Started on the next microtask, so `run` exists before the body can finish.
  const run: Promise<void> = Promise.resolve().then(async () => {
    const waiting = entry.waiting.reduce((sum, units) => sum + units, 0);
    // The rule the sync asks under: a request under another (code naming one rule with other figures) may change the entry's meanwhile.
    const { objectName } = entry;
    const rule = asked ?? entry.rule;
    const request = nextSync(entry.key, rule, self(), Math.max(need, waiting), Date.now(), release, entry.waiting.reduce((most, units) => Math.max(most, units), need));
    try {
      // Without a place (a `limit` call that names none) a rule that aggregates syncs straight to its object.
      const via = relayFor(syncsThrough(rule.aggregate, entry.key.relayed), context, objectName);
      const stub = limiterStub(entry.namespace, via ?? objectName);
      const call = (): Promise<Lease> => {
        metrics.count("floodgate_durable_object_calls_total", { method: via ? "relay" : "sync" });
        return via ? stub.relay(objectName, { policy: policyOf(rule), request }, rule.timeoutMs) : stub.sync(policyOf(rule), request);
      };
      // A sync is answered, never applied twice ((isolate, seq)), so a fault Cloudflare marks
      // retryable is retried once; an overloaded object is not, and the key backs off at once.
      const lease = await retriedOnce(call);
      const answeredAt = Date.now();
      applyLease(entry.key, rule, lease, answeredAt);
      entry.answeredUnder = rule;
      if (!release) callWhenBooked(context, entry, request, answeredAt, chain);
      rulePeers.set(entry.rule.name, Math.max(rulePeers.get(entry.rule.name) ?? 0, lease.peers));
      ruleBreaker(entry.rule.name, namespaceTag(entry.namespace)).succeeded(answeredAt);
      metrics.count("floodgate_syncs_total", { result: "ok" });
    } catch (error) {
      // A sync a request gave up on was counted then.
      if (entry.late !== run) failed(entry, Date.now());
      metrics.count("floodgate_syncs_total", { result: "failed" });
      throw error;
    } finally {
      if (entry.inflight === run) entry.inflight = null;
    }
    // Not after an answer to another seq, which leaves the sync unanswered: sent again, it would get that answer again, and again.
    if (entry.key.outbox === null) letGo(context, entry);
  });
  entry.inflight = run;
  entry.inflightSince = now;
  context.waitUntil(run.catch(() => undefined));
  return run;
}

/**
 * A request stopped waiting for the key's sync at the rule's timeout: a slow object is a failing
 * one, left alone (the key backs off, the rule's breaker counts it) so that the next requests are
 * decided by `onError` at once rather than each waiting out the same hung call. The sync runs on;
 * its answer, if it comes, ends the backoff.
 */
function syncLate(entry: Entry, now: number): void {
  if (!entry.inflight || entry.late === entry.inflight) return;
  entry.late = entry.inflight;
  failed(entry, now);
  metrics.count("floodgate_syncs_total", { result: "late" });
}

/** Counts a failed or late sync: the key backs off (see `syncFailed`), and then the rule's breaker hears of it. */
function failed(entry: Entry, now: number): void {
  if (syncFailed(entry.key, entry.rule, now)) ruleBreaker(entry.rule.name, namespaceTag(entry.namespace)).failed(entry.tracked, entry.rule.timeoutMs, now);
}

/**
 * Lets a sync no request waits on run its course; when it is the sync this call started (not one it
 * joined, which the requests that started or joined it see), its failure is counted and logged, once.
 */
function inBackground(entry: Entry, start: () => Promise<void>): Promise<void> {
  const joined = entry.inflight;
  const run = start();
  return run.catch(run !== joined ? countError("sync", entry.rule) : () => undefined);
}

/**
 * Sets the timer that makes the key's booked call when no request comes to make it, if one is
 * worth setting (see `onTimeCallAt` and `callOnTime`), under the `waitUntil` of the request the
 * answered sync ran under, as one `chain` of at most ON_TIME_CALLS_PER_CHAIN calls within
 * ON_TIME_CALL_WITHIN_MS of that request.
 */
function callWhenBooked(context: FastContext, entry: Entry, sent: SyncRequest, answeredAt: number, chain: OnTimeChain): void {
  const at = onTimeCallAt(entry.key, entry.rule, sent, chain, answeredAt);
  if (at === undefined) return;
  const due = new Promise((resolve) => setTimeout(resolve, at - answeredAt));
  context.waitUntil(
    due.then(() => {
      // The key may have left the table, or come back under a re-read rule (a new entry, the same key).
      const current = table.peek(entry.tracked);
      if (current?.key !== entry.key || current.inflight || !callOnTime(current.key, answeredAt, Date.now())) return;
      return inBackground(current, () => sync(context, current, 0, false, { since: chain.since, calls: chain.calls + 1 }));
    }),
  );
}

/** Keys pushed out of the table give back their unspent lease in the background (see {@link letGo}). */
function flushEvicted(context: FastContext): void {
  if (evicted.length === 0) return;
  const batch = evicted;
  evicted = [];
  for (const entry of batch) letGo(context, entry);
}

/**
 * Gives back what a key out of the table still holds, with a release sync, once neither a sync nor
 * a request is busy with it; called again as each of those ends, and after each answered sync, so
 * that a lease an answer brings to a key already out is given back too. Surrendered under a sync
 * in flight, the lease came back anyway with its answer, pinned at the object and never reported:
 * 6 units of a daily 10 were lost until the window ended. A failed sync does not call it: the
 * release would resend it, and an object that stays down would be asked again and again.
 */
function letGo(context: FastContext, entry: Entry): void {
  if (!entry.evicted || entry.inflight || entry.waiting.length > 0) return;
  if (hasPending(entry.key)) {
    surrender(entry.key);
    void inBackground(entry, () => sync(context, entry, 0, true));
  } else if (leaving.peek(entry.tracked) === entry) {
    leaving.delete(entry.tracked);
  }
}

/**
 * Once a second, idle keys whose lease expired give it back, asking for no new one, so units an
 * isolate no longer needs return to the others. Least recently used first, a bounded number per sweep.
 */
function sweep(context: FastContext, now: number): void {
  if (now - lastSweep < 1_000) return;
  lastSweep = now;
  let budget = 32;
  for (const entry of table.values()) {
    if (budget === 0) break;
    if (entry.inflight || !releasable(entry.key, entry.rule, now)) continue;
    budget--;
    void inBackground(entry, () => sync(context, entry, 0, true));
  }
}
