/** One key as an isolate sees it in fast mode: leased units to spend locally, and what to tell the object next. */
import { slotOf, type Decision } from "../algorithms";
import type { Rule } from "../config/types";
import type { Share } from "../limiter/local-share";
import { backoffMs } from "../strict/breaker";
import { isRoomy, type Lease, type Report, type Spent, type SyncRequest } from "./lease";
import { crowded, syncsThrough } from "./relay";

/** A lease as the isolate holds it: units it may still spend until `expiresAt`, and what it spent, not yet reported. */
interface Lot {
  lease: number;
  units: number;
  expiresAt: number;
  spent: Spent[];
}

/**
 * Who sends syncs: the isolate's id, and a sequence that only rises across all its keys. A key
 * forgotten and seen again starts afresh, and its object must still see a higher number than
 * the last it answered from this isolate, or it would take the new sync for a retry.
 */
export interface Sender {
  isolate: string;
  nextSeq(): number;
}

/** Plain per-key state, changed only by the functions below, each given the time. */
export interface LocalKey {
  lots: Lot[];
  /** units held after the last grant (from an object of an earlier version: the grant's); a sync starts early once fewer than half of them are left */
  granted: number;
  /** the object said the key is denied until then: deny locally, no call */
  blockedUntil: number;
  retryAfter: number;
  /** the last global standing the object reported */
  standing: Decision | null;
  peers: number;
  /** `aggregate: "auto"` sends this key's syncs through its continent's relay (see `crowded`, ./relay, and {@link syncFailed}) */
  relayed: boolean;
  /** units asked since `since` (admitted or not), for the object to size the next lease */
  demand: number;
  since: number;
  /** leases that ended, to report with the next sync */
  reports: Report[];
  /** a sync sent and not yet answered: retried as it is, so the object applies it once */
  outbox: SyncRequest | null;
  lastSyncAt: number;
  /** when the unanswered sync was last sent, and how long the last answered one took */
  sentAt: number;
  roundTripMs: number;
  /** the call the object booked for this isolate: the periodic sync waits for it */
  nextSyncAt: number;
  /** the object has no units to spare (see Lease's `saturated`): an emptied lease waits for `nextSyncAt` (see ./schedule) */
  saturated: boolean;
  /** units `onError` admitted while the object could not be reached, for the next sync to report */
  unleased: Spent[];
  /** units given back after the report that counted them left, for the next sync to give back (see {@link refundLocally}) */
  refunds: Spent[];
  /** after a failed sync, none is tried before then */
  retryAt: number;
  failures: number;
}

/** A key the isolate has not synced yet; `relayed`: its first sync goes through the relay (see `firstThroughRelay`, ./relay). */
export function freshKey(now: number, relayed = false): LocalKey {
  return {
    lots: [],
    granted: 0,
    blockedUntil: 0,
    retryAfter: 0,
    standing: null,
    peers: 1,
    relayed,
    demand: 0,
    since: now,
    reports: [],
    refunds: [],
    outbox: null,
    lastSyncAt: Number.NEGATIVE_INFINITY,
    sentAt: now,
    roundTripMs: 0,
    nextSyncAt: Number.NEGATIVE_INFINITY,
    saturated: false,
    unleased: [],
    retryAt: 0,
    failures: 0,
  };
}

/**
 * Decides a request from the key's lease: admitted if enough leased units are left, denied while
 * the object's denial holds, and `undefined` when only a sync can tell (no lease left, no denial).
 */
export function decideLocally(key: LocalKey, rule: Rule, cost: number, now: number): Decision | undefined {
  key.demand += cost;
  return fromLease(key, rule, cost, now);
}

/**
 * The denial of a request costing more than the rule can ever admit (`largestCost`), as the key
 * stands for this isolate: told to wait one period, as every algorithm tells it (or until the key's
 * block ends). Its units are not counted in `demand`, which sizes the isolate's leases.
 */
export function beyondCapacity(key: LocalKey, rule: Rule, now: number): Decision {
  expireLots(key, now);
  // A block the key is under ends later than a period may: the wait says when it does.
  return standing(key, rule, false, now, "cost-exceeds-capacity", Math.max(now + rule.periodMs, key.blockedUntil));
}

/**
 * Whether the object's denial of the key holds, or a busy isolate's hold at its booked call (see
 * `heldUntil`), and the lease cannot pay for `cost`: then {@link decideLocally} denies it from the
 * cache, and no other rule need ask its object either.
 */
export function deniedLocally(key: LocalKey, rule: Rule, cost: number, now: number): boolean {
  // The request is not counted in `demand` yet: any demand at all makes the isolate busy.
  return leaseLeft(key) < cost && now < cachedUntil(key, rule, 0, now);
}

/**
 * What {@link decideLocally} would answer a one-unit request now, spending and counting nothing:
 * an admission while the lease holds a unit, this isolate's denial while it denies the key;
 * undefined when only a sync could tell. What a peek must say.
 */
export function localPeek(key: LocalKey, rule: Rule, now: number): Decision | undefined {
  expireLots(key, now);
  if (leaseLeft(key) >= 1) return standing(key, rule, true, now, "local");
  return deniedLocally(key, rule, 1, now) ? standing(key, rule, false, now, "cache", cachedUntil(key, rule, 0, now)) : undefined;
}

/** {@link decideLocally} for a request whose demand is already counted: the one that waited for a sync. */
export function fromLease(key: LocalKey, rule: Rule, cost: number, now: number): Decision | undefined {
  expireLots(key, now);
  const left = leaseLeft(key);
  if (left >= cost) {
    spend(key, cost, slotOf(rule, now));
    return standing(key, rule, true, now, "local");
  }
  const until = cachedUntil(key, rule, cost, now);
  return now < until ? standing(key, rule, false, now, "cache", until) : undefined;
}

/**
 * Until when the isolate denies the key from its cache, as seen at `now`: the object's denial while
 * it holds, otherwise a busy isolate's hold at its booked call; not after `now` when neither does.
 * `counted`: the units of the request deciding that `demand` already holds.
 */
function cachedUntil(key: LocalKey, rule: Rule, counted: number, now: number): number {
  return now < key.blockedUntil ? key.blockedUntil : heldUntil(key, rule, counted);
}

/**
 * Until when a busy isolate of a saturated key, its lease spent, keeps denying once its booked
 * time has come: while the booked call, which the first request after that time starts in the
 * background, is answered (within the rule's timeout). Its units are the isolate's share of what
 * the key freed, for whichever request comes next; a request made to wait on the call would
 * mostly be refused at the end of it. Busy: a sync is on its way, or the isolate was asked for more
 * since its last sync than the request now deciding; a quiet isolate's request waits on the call,
 * as any does, since its key may have freed units long before. Not when the object's denial
 * outlasted the booked time: then what ends it is the key freeing units, not a booked call, and the
 * first request after that asks, as any does (a client of a short window, denied, that came back
 * once its oldest request had left it was refused again). Nor while the isolate has units to give
 * back that the object has not heard of (see {@link refundLocally}). 0 when not held.
 */
function heldUntil(key: LocalKey, rule: Rule, counted: number): number {
  const busy = key.outbox !== null || key.demand > counted;
  return key.saturated && key.refunds.length === 0 && key.blockedUntil <= key.nextSyncAt && busy ? Math.min(key.nextSyncAt + rule.timeoutMs, turnsAt(key, rule)) : 0;
}

/**
 * When a fixed window's key is back to its full quota, as the object last said: no denial of this
 * isolate's outlasts the window's turn, which frees everything at once (a saturated key's booked
 * call, up to a minute off, denied that long into a fresh window). The other algorithms free units
 * a few at a time, which the booked calls share out: their isolates deny until their turn.
 */
function turnsAt(key: LocalKey, rule: Rule): number {
  return rule.algorithm === "fixed-window" ? (key.standing?.resetAt ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
}

/**
 * A sliding-window key offers to take a lease this many sync intervals long, which the object
 * grants when it finds the key roomy; its next call is still booked one interval on. A token
 * bucket's stay one interval: how long a lease lasts bounds its burst.
 */
const ROOMY_HORIZON = 10;

/**
 * How far ahead of its booked call an isolate of a key with nothing to spare, its lease spent, makes
 * that call: with a request that comes within this many of its mean gaps between requests of the
 * booked time, and within one interval of it. A quiet isolate's first request after the booked time
 * would otherwise make the call and wait on it; most of those were then admitted (the key had freed
 * units since the cut-short grant), so the call may as well be on its way before. At 512 isolates
 * and 1× this cut the simulation's waits by a fifth to a quarter, under-admission moving by 0.1
 * point at most (0.2–0.3 more in flash crowds and the churn stress).
 */
const BOOKED_CALL_LEAD_GAPS = 2;

/**
 * Whether a background sync is due: the call the object booked has come (or, for an isolate of a
 * key with nothing to spare whose lease is spent, comes within its lead: BOOKED_CALL_LEAD_GAPS),
 * the lease will not last until then, or a retry waits. An isolate of a roomy key that admitted
 * nothing since its last call skips the periodic sync while its lease is healthy, until the lease's
 * last interval: an idle isolate costs nothing, and renewing before the end keeps a key used now
 * and then from waiting. One that admits calls when booked: a limit lowered at the object (see
 * leasePolicy) reaches every isolate still spending by then, and the object cuts its leases back.
 */
export function syncDue(key: LocalKey, rule: Rule, now: number): boolean {
  if (now < key.retryAt) return false;
  // Units given back after their lease was reported spent are the object's to lend again: it hears of them now.
  if (key.outbox || key.refunds.length > 0) return true;
  const left = leaseLeft(key);
  const low = runsOutBeforeNextSync(key, left, now);
  const idle = key.demand === 0 && roomy(key) && left > 0 && !low && leaseEnd(key) - now > rule.syncMs;
  if (now >= key.nextSyncAt && !idle) {
    return key.demand > 0 || key.reports.length > 0 || key.unleased.length > 0 || left > 0;
  }
  if (key.saturated && left === 0 && now < key.nextSyncAt && key.nextSyncAt - now < Math.min(rule.syncMs, BOOKED_CALL_LEAD_GAPS / paceOf(key, now))) return true;
  // Running low: top up early, no more than four times an interval; a saturated key waits its turn.
  return (now - key.lastSyncAt) * 4 >= rule.syncMs && low && !key.saturated && now >= key.blockedUntil;
}

/**
 * How far ahead of the booked call an isolate sets the timer that makes the call with no request
 * to make it (see {@link callOnTime}), at most: a call booked further off (a key with thousands of
 * isolates, or a long `sync`) is left to the first request after it. The timer holds the waitUntil
 * of the request whose sync was answered, which Workers grants 30 s.
 */
export const ON_TIME_CALL_MAX_MS = 5_000;

/**
 * The calls a chain of timers may make, and how long after the request it runs under (see
 * {@link onTimeCallAt}): each answer of such a call sets the next timer under that same request's
 * waitUntil, which Workers grants 30 s, and every call counts against that request's subrequests
 * (50 on Workers Free). At 512 isolates and 1× the simulation's requests waited 3 % more often
 * with 4 a chain than with no cap, 5 % with 2, and 14 % with 1.
 */
export const ON_TIME_CALLS_PER_CHAIN = 4;
export const ON_TIME_CALL_WITHIN_MS = 20_000;

/** A chain of timed calls under one request's waitUntil: when that request was seen, and the calls its timers have made. */
export interface OnTimeChain {
  since: number;
  calls: number;
}

/**
 * When the isolate makes its booked call with no request to make it, as set when the sync `sent`
 * was answered: one round trip before the booked time, so the answer is back by then. A timer holds
 * a request's waitUntil until it fires, so none is set (undefined) where it would find nothing to
 * do: at the pace `sent` reported (spread over an interval at least), and a standard deviation
 * more, the lease will still be healthy then (see {@link callOnTime}); or the object's denial holds
 * past the booked time, so the call would find nothing to lease. Nor where it may not wait: the
 * call is more than {@link ON_TIME_CALL_MAX_MS} off, or the `chain` of timers under one request
 * has made {@link ON_TIME_CALLS_PER_CHAIN} calls or would run past {@link ON_TIME_CALL_WITHIN_MS}
 * of that request. Nor where the answer, straight from the key's object, took more than half the
 * rule's timeout: a busy object would only see its queue grow (at the cold start of 4,096 isolates
 * at 10×, where onError admits beside the leases, timers after such answers let the simulation's
 * first window reach 1.011–1.013 of the limit, against 1.008–1.010 without them). Through a relay
 * (a rule that aggregates) an answer takes the relay's batching too, which the object paces, so a
 * long one says little of the object: skipping those timers there raised the simulation's waits at
 * 512 isolates by a tenth.
 */
export function onTimeCallAt(key: LocalKey, rule: Rule, sent: SyncRequest, chain: OnTimeChain, now: number): number | undefined {
  const at = Math.max(now, key.nextSyncAt - key.roundTripMs);
  if (at - now > ON_TIME_CALL_MAX_MS || chain.calls >= ON_TIME_CALLS_PER_CHAIN || at - chain.since > ON_TIME_CALL_WITHIN_MS) return undefined;
  const busy = syncsThrough(rule.aggregate, key.relayed) === undefined && key.roundTripMs * 2 > rule.timeoutMs;
  if (key.blockedUntil > key.nextSyncAt || busy) return undefined;
  const pace = sent.demand / Math.max(sent.elapsedMs, sent.horizonMs);
  const expected = pace * (at - now);
  return runsLow(key, leaseLeft(key) - expected - Math.sqrt(expected)) ? at : undefined;
}

/**
 * Whether the timer set when a sync was answered at `answeredAt` makes the booked call now. A
 * request makes the booked call only when it comes, so a quiet isolate's first request after the
 * booked time found a spent or nearly spent lease and waited on the call (or, at a key with nothing
 * to spare, was denied until it was answered). The timer makes it on time instead, for a key asked
 * for since its last sync whose lease is down to one unit or less than half its grant; no later
 * sync has been answered, and none is on its way (a failed one keeps its outbox for the retry its
 * backoff allows). A key with a healthy lease leaves the call to its next request, in the
 * background: the call made early would only refill it early, and units held longer are units the
 * other isolates go without. At 512 isolates and 1×
 * this about halved the simulation's waits (2.0–2.2 % to 1.1–1.2 %), for 0.3 points more
 * under-admission, which the top-up rounded once (see `grantLease`) had taken off first.
 */
export function callOnTime(key: LocalKey, answeredAt: number, now: number): boolean {
  if (key.lastSyncAt !== answeredAt || key.outbox !== null || key.demand === 0) return false;
  expireLots(key, now);
  return runsLow(key, leaseLeft(key));
}

/** Whether `left` units are one or fewer, or less than half the last grant. */
function runsLow(key: LocalKey, left: number): boolean {
  return left <= 1 || left * 2 < key.granted;
}

/**
 * Whether the sweep should give the key's lease back, asking for none: nothing asked of it for an
 * interval or more since its last sync, a sync due, and no lease still running. A quiet isolate's
 * lease is made to outlast the gaps between its requests; given back while it runs, the next
 * request would wait on a call.
 */
export function releasable(key: LocalKey, rule: Rule, now: number): boolean {
  const idle = key.demand === 0 && now - key.lastSyncAt >= rule.syncMs;
  return idle && !key.lots.some((lot) => lot.expiresAt > now) && syncDue(key, rule, now);
}

/** Whether less than half the lease is left and, at the pace of its demand since the last sync, it runs out before the booked call. */
function runsOutBeforeNextSync(key: LocalKey, left: number, now: number): boolean {
  if (key.granted === 0) return false;
  return left * 2 < key.granted && (now >= key.nextSyncAt || left < paceOf(key, now) * (key.nextSyncAt - now));
}

/** Units a ms the key was asked for since its last sync. */
function paceOf(key: LocalKey, now: number): number {
  return key.demand / Math.max(1, now - key.since);
}

function roomy(key: LocalKey): boolean {
  const global = key.standing;
  return global !== null && global.allowed && isRoomy(global.remaining, key.granted, key.peers);
}

/**
 * The sync to send now: the unanswered one again if there is one (same seq, so the object
 * applies it once), otherwise a new one reporting what every lease spent and what the ended ones
 * give back, and the demand gathered since. A `release` sync only settles: the key is leaving, or
 * idle, and wants no new lease.
 */
export function nextSync(key: LocalKey, rule: Rule, sender: Sender, need: number, now: number, release = false): SyncRequest {
  key.sentAt = now;
  if (key.outbox) return key.outbox;
  expireLots(key, now);
  const reports = key.reports;
  for (const lot of key.lots) {
    if (lot.spent.length === 0) continue;
    reports.push({ lease: lot.lease, spent: lot.spent, unspent: 0 });
    lot.spent = [];
  }
  const window = rule.algorithm === "sliding-window";
  // What the leases will still hold when the answer comes: the grant tops that up.
  const held = Math.max(0, leaseLeft(key) - paceOf(key, now) * key.roundTripMs);
  key.outbox = {
    isolate: sender.isolate,
    seq: sender.nextSeq(),
    reports,
    demand: key.demand,
    elapsedMs: Math.max(0, now - key.since),
    need,
    horizonMs: rule.syncMs,
    held,
    ...(window ? { roomyHorizonMs: ROOMY_HORIZON * rule.syncMs } : {}),
    ...(release ? { release } : {}),
    ...(key.unleased.length > 0 ? { unleased: key.unleased } : {}),
    ...(key.refunds.length > 0 ? { refunds: key.refunds } : {}),
  };
  key.unleased = [];
  key.refunds = [];
  key.reports = [];
  key.demand = 0;
  key.since = now;
  return key.outbox;
}

/**
 * Takes the object's answer: new leased units, its denial if any, and its view of the key. A denial
 * holds for at least one sync interval: units freed sooner go to whichever isolate syncs next, and
 * an isolate that asked again each time one unit came free would call the object per request.
 */
export function applyLease(key: LocalKey, rule: Rule, lease: Lease, now: number): void {
  if (!key.outbox || lease.seq !== key.outbox.seq) return;
  key.outbox = null;
  key.roundTripMs = now - key.sentAt;
  key.lastSyncAt = now;
  key.failures = 0;
  key.retryAt = 0;
  key.standing = lease.standing;
  key.peers = lease.peers;
  key.relayed = crowded(key.relayed, lease.peers);
  // An object of an earlier version books nothing: then the periodic sync is one interval on.
  key.nextSyncAt = lease.nextSyncAt ?? now + rule.syncMs;
  // A rule with a block must let the object see a denied request, which is what starts the block.
  key.saturated = (lease.saturated ?? false) && rule.blockMs === null;
  // Lots granted under a looser policy than the object now leases under (a limit another Worker
  // version lowered) are given up at once. A top-up (see Lease's `topsUp`) renews the others to end
  // with it, but not one that has already ended: its object may have counted it spent and stopped
  // pinning it. From an object of an earlier version, which grants on top of them, a lease
  // outlasting its booked call (a roomy key) replaces them, or an isolate calling every interval
  // while it spends would hold ten at once.
  if (lease.revoke || (!lease.topsUp && lease.units > 0 && lease.expiresAt - key.nextSyncAt > rule.syncMs)) endLots(key);
  if (lease.topsUp) {
    for (const lot of key.lots) if (lot.expiresAt > now) lot.expiresAt = Math.max(lot.expiresAt, lease.expiresAt);
    expireLots(key, now);
  }
  if (lease.units > 0) key.lots.push({ lease: lease.seq, units: lease.units, expiresAt: lease.expiresAt, spent: [] });
  // A blocked key stops spending what it still holds: the block applies to every isolate from its next sync.
  if (lease.standing.reason === "blocked") surrender(key);
  key.granted = lease.topsUp ? leaseLeft(key) : lease.units;
  key.retryAfter = lease.standing.allowed ? 0 : lease.standing.retryAfter;
  // Only an empty grant with the key denied is a denial: units leased, or an empty background
  // grant while the key has room, leave the isolate free to ask again. A rule with a block caches
  // only the block: the object must see a denied request to start it, and a background sync asks
  // for nothing it could deny.
  const denies = lease.units === 0 && !lease.standing.allowed && (rule.blockMs === null || lease.standing.reason === "blocked");
  const denied = denies ? now + Math.max(key.retryAfter, rule.syncMs) : 0;
  // A saturated key's units go out in the calls the object booked: one asked for sooner would only
  // take them from an isolate whose turn it is (and see `heldUntil` for the booked call itself).
  // Nor is a unit to be had before the key frees one, when the grant took the last.
  const frees = lease.standing.remaining < 1 ? lease.standing.moreAt : 0;
  key.blockedUntil = Math.min(key.saturated ? Math.max(denied, key.nextSyncAt, frees) : denied, turnsAt(key, rule));
  // Units given back after this sync left (see refundLocally) are not in its answer: the next request asks again.
  if (key.refunds.length > 0 && lease.standing.reason !== "blocked") key.blockedUntil = 0;
}

/**
 * How long an isolate none of whose objects for a rule has ever answered refuses by `onError`
 * "local" before it takes the whole limit as its share. A cold start's overloaded object answers
 * its queue within seconds (the simulation's 4,096 isolates: under ten), and until then thousands
 * of isolates, each taking a whole limit, would admit far past it; an outage lasts longer, and then
 * limiting on alone keeps the API up rather than refusing every request of every new isolate.
 */
export const COLD_REFUSAL_MS = 30_000;

/**
 * What this isolate knows of how the key is shared, for its rule's `onError` "local" share: the
 * object's last count of isolates and of free units, and when it said so; for a key whose object has
 * never answered, `ruleMost` isolates (the most any object of the rule has reported to this isolate)
 * and nothing known taken. When no object of the rule has answered (`ruleMost` 0), none: `local`
 * refuses, for {@link COLD_REFUSAL_MS} after the rule first failed here (`coldForMs` ago); past
 * that, the isolate counts itself alone.
 */
export function knownShare(key: LocalKey, ruleMost: number, coldForMs: number): Share {
  if (key.lastSyncAt === Number.NEGATIVE_INFINITY) {
    const peers = ruleMost > 0 ? ruleMost : coldForMs >= COLD_REFUSAL_MS ? 1 : 0;
    return { peers, free: Number.POSITIVE_INFINITY, heardAt: key.lastSyncAt };
  }
  return { peers: key.peers, free: key.standing?.remaining ?? Number.POSITIVE_INFINITY, heardAt: key.lastSyncAt };
}

/** Notes units the rule's `onError` admitted while the object could not be reached: the next sync has them counted. */
export function admittedUnleased(key: LocalKey, rule: Rule, units: number, now: number): void {
  record(key.unleased, slotOf(rule, now), units);
}

/** A sync failed: keep everything it carried for the retry, back off, and under `aggregate: "auto"` retry through the relay. */
export function syncFailed(key: LocalKey, rule: Rule, now: number): void {
  key.failures++;
  key.retryAt = now + backoffMs(rule.syncMs, key.failures);
  // An object that did not answer may be crowded beyond what its answers said, as at a cold start
  // where every isolate meets the key at once: at the simulation's, 4,096 isolates at 10× making
  // their first syncs straight, retries through the continents' relays cut onError's answers by a
  // fifth and its admissions by four fifths.
  if (rule.aggregate === "auto") key.relayed = true;
}

/**
 * Gives back units a request spent from the lease when another rule denied it: into the newest
 * live lease, reported as a negative spend. When none is live (the request spent the last unit of
 * the lease that paid, which then ended and was reported spent), the next sync gives the units
 * back on their own (`refunds`), as a strict refund does, and until it has, the object's last word
 * (which counted them) denies nothing: the next request asks again. A block stands. The units
 * are given back in the slot they were spent in (`spentAt`): given back in a later bucket, they
 * would stay counted in theirs, which leaves the window first, and the key would admit one more.
 */
export function refundLocally(key: LocalKey, rule: Rule, units: number, spentAt: number, now: number): void {
  expireLots(key, now);
  const slot = slotOf(rule, Math.min(spentAt, now));
  const newest = key.lots.at(-1);
  if (newest) {
    newest.units += units;
    record(newest.spent, slot, -units);
    return;
  }
  record(key.refunds, slot, units);
  if (key.standing?.reason !== "blocked") key.blockedUntil = Math.min(key.blockedUntil, now);
}

/** Ends every lease, reporting what each spent and giving back the rest, as when the key leaves the table. */
export function surrender(key: LocalKey): void {
  endLots(key);
  key.demand = 0;
}

/** Ends every lot: the next sync reports what each spent and gives back the rest. */
function endLots(key: LocalKey): void {
  for (const lot of key.lots) finish(key, lot);
  key.lots = [];
}

/** Whether the key still holds something the object should hear about. */
export function hasPending(key: LocalKey): boolean {
  return key.outbox !== null || key.reports.length > 0 || key.lots.length > 0 || key.demand > 0 || key.unleased.length > 0 || key.refunds.length > 0;
}

export function leaseLeft(key: LocalKey): number {
  return key.lots.reduce((sum, lot) => sum + lot.units, 0);
}

/** When the key's last lease ends; -Infinity when it holds none. */
function leaseEnd(key: LocalKey): number {
  return key.lots.reduce((end, lot) => Math.max(end, lot.expiresAt), Number.NEGATIVE_INFINITY);
}

/** Ends the lots whose lease has run out: the next sync reports what each spent and gives back the rest. */
export function expireLots(key: LocalKey, now: number): void {
  if (key.lots.every((lot) => lot.expiresAt > now)) return;
  for (const lot of key.lots) if (lot.expiresAt <= now) finish(key, lot);
  key.lots = key.lots.filter((lot) => lot.expiresAt > now);
}

/** Spends from the lots that expire first; a lot spent to the last unit is over and reported. */
function spend(key: LocalKey, cost: number, slot: number): void {
  let owed = cost;
  for (const lot of key.lots) {
    const take = Math.min(lot.units, owed);
    lot.units -= take;
    if (take > 0) record(lot.spent, slot, take);
    owed -= take;
    if (owed === 0) break;
  }
  for (const lot of key.lots) if (lot.units === 0) finish(key, lot);
  key.lots = key.lots.filter((lot) => lot.units > 0);
}

/** Queues the lot's final report: what it spent since it last reported, and what it never will. */
function finish(key: LocalKey, lot: Lot): void {
  key.reports.push({ lease: lot.lease, spent: lot.spent, unspent: lot.units });
}

/** Adds units spent (negative: given back) at `slot` to a report, merging with the last entry for the same slot. */
function record(spent: Spent[], slot: number, units: number): void {
  const last = spent.at(-1);
  if (last && last.at === slot) last.units += units;
  else spent.push({ at: slot, units });
}

/**
 * The object's last word as it stands at `now`. A fixed window's count is gone once its window has
 * ended: until the next sync says how the new window stands, the key is as this isolate has used it
 * there (what it spent and holds; its peers' use it learns then), back to full at the window's end.
 */
function lastWord(key: LocalKey, rule: Rule, now: number): Decision | null {
  const global = key.standing;
  if (global === null || rule.algorithm !== "fixed-window") return global;
  const window = slotOf(rule, now);
  // A denial the isolate still holds (a block) outlasts the window.
  if (slotOf(rule, key.lastSyncAt) >= window || (!global.allowed && now < key.blockedUntil)) return global;
  const inWindow = (spent: readonly Spent[]) => spent.reduce((sum, s) => sum + (s.at === window ? s.units : 0), 0);
  const used = key.lots.reduce((sum, lot) => sum + inWindow(lot.spent), 0) + key.reports.reduce((sum, r) => sum + inWindow(r.spent), 0);
  const held = leaseLeft(key);
  const full = used === 0 ? now : window + rule.periodMs;
  return { allowed: true, limit: rule.limit, remaining: Math.max(0, rule.limit - used - held), resetAt: full, moreAt: full, retryAfter: 0 };
}

/** A decision in the shared shape, from the lease left and the object's last word; a denial holds until `until`. */
function standing(key: LocalKey, rule: Rule, allowed: boolean, now: number, reason: "local" | "cache" | "cost-exceeds-capacity", until = now): Decision {
  const global = lastWord(key, rule, now);
  const decision: Decision = {
    allowed,
    limit: rule.limit,
    remaining: leaseLeft(key) + (global?.allowed ? global.remaining : 0),
    resetAt: Math.max(global?.resetAt ?? now, now),
    // What the object last said; once that has passed, this isolate cannot tell and says "now".
    moreAt: Math.max(global?.moreAt ?? now, now),
    retryAfter: allowed ? 0 : Math.max(1, until - now),
    // A denial from the cache while the object's block holds says so, as the object's own would.
    reason: reason === "cache" && global?.reason === "blocked" && now < key.blockedUntil ? "blocked" : reason,
  };
  return decision;
}
