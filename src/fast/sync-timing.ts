/** When an isolate syncs a fast key with no request waiting on it: its booked call, the timer that makes that call on time, an early top-up of a low lease, an idle lease given back. */
import type { Rule } from "../config/types";
import { isRoomy, type SyncRequest } from "./lease";
import type { LocalKey } from "./local";
import { expireLots, givesBack, leaseEnd, leaseLeft } from "./lots";
import { syncsThrough } from "./relay";

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
  if (key.outbox || givesBack(key)) return true;
  const left = leaseLeft(key);
  const low = runsOutBeforeNextSync(key, left, now);
  // Charges owed (negative refunds) ride the booked call: sent at once, every charged request cost a call.
  const owes = key.refunds.length > 0;
  const idle = key.demand === 0 && !owes && roomy(key) && left > 0 && !low && leaseEnd(key) - now > rule.syncMs;
  if (now >= key.nextSyncAt && !idle) {
    return key.demand > 0 || key.reports.length > 0 || key.unleased.length > 0 || owes || left > 0;
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
export function paceOf(key: LocalKey, now: number): number {
  return key.demand / Math.max(1, now - key.since);
}

function roomy(key: LocalKey): boolean {
  const global = key.standing;
  return global !== null && global.allowed && isRoomy(global.remaining, key.granted, key.peers);
}
