/** Sliding log: the time of every admitted unit, so that no period ending now ever holds more than `limit`: exact, at one pair per request. */
import { firstAfter, giveBack, insertionIndex, leftBy, newest, unitsIn, withoutEmpty } from "./timed-log";
import type { Outcome, Policy, SlidingLogState } from "./types";

/** Most units a sliding-log rule may allow per period: its state keeps up to one pair per unit. */
export const MAX_LOG_LIMIT = 1_000;

/** Pairs that left the period a log may keep before it is copied without them. */
const STALE_PAIRS = 32;

/**
 * Decides one request of `cost` units at `now` (epoch ms). The log holds the requests admitted in
 * the period ending now, (now − periodMs, now]; the request is admitted if they and it come to at
 * most `limit` units. A denied request is not logged. When the clock stepped back behind the
 * newest entry, or behind the time the log was last pruned at, the decision is made at that time.
 *
 * @example
 * const { decision, state } = slidingLog({ algorithm: "sliding-log", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 }, undefined, 1, Date.now());
 */
export function slidingLog(policy: Policy, stored: SlidingLogState | undefined, cost: number, now: number): Outcome<SlidingLogState> {
  const at = Math.max(now, latest(stored));
  const state = pruned(policy.periodMs, stored, at);
  const used = state.used;
  const allowed = used + cost <= policy.limit;
  const next = allowed && cost > 0 ? appended(state, at, cost) : state;
  const { log, from, end } = next;
  const remaining = Math.max(0, policy.limit - next.used);
  const resetAt = end > from ? log[end - 2]! + policy.periodMs : at;
  // More comes when enough of the oldest units leave that one more fits.
  const moreAt = remaining >= policy.limit ? at : leftBy(policy.periodMs, log, from, end, next.used - (policy.limit - remaining - 1));
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the limit never fits; it is told to wait one period rather than forever.
  const fits = cost <= policy.limit;
  const retryAfter = fits ? leftBy(policy.periodMs, log, from, end, used + cost - policy.limit) - now : policy.periodMs;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter, reason }, state: next };
}

/**
 * Logs `units` taken at `at` (negative: given back) with no decision: refunds, and hits an isolate
 * admitted on its own, each placed at the ms it was spent. Units from before the period are
 * already gone and dropped; a time after the newest entry and `now` (clock skew) is taken as the
 * later of the two. Units given back come off the entries at or before `at`, newest first: never
 * an entry that would stay longer than the units it gives back.
 */
export function adjustSlidingLog(
  policy: Policy,
  stored: SlidingLogState | undefined,
  units: number,
  at: number,
  now: number,
): SlidingLogState {
  const last = Math.max(now, latest(stored));
  const state = pruned(policy.periodMs, stored, last);
  const when = Math.min(at, last);
  if (units === 0 || when <= last - policy.periodMs) return state;
  if (units > 0 && when === last) return appended(state, when, units);
  // Placed before the newest entry, or given back: the pairs are copied and changed.
  const pairs = state.log.slice(state.from, state.end);
  if (units > 0) pairs.splice(insertionIndex(pairs, when), 0, when, units);
  else giveBack(pairs, -units, when);
  const kept = withoutEmpty(pairs);
  return logState(policy.periodMs, kept, 0, kept.length, unitsIn(kept, 0, kept.length), state.seenAt ?? 0);
}

/** Units the log holds in the period ending `now`, by the state's own period: what a change of rule carries over. */
export function usedSlidingLog(stored: SlidingLogState, now: number): number {
  return pruned(stored.periodMs, stored, Math.max(now, latest(stored))).used;
}

/** When units decided at `now` were logged: `now`, or the time decided at if the clock stepped back behind it. */
export function countedAtSlidingLog(state: SlidingLogState, now: number): number {
  return Math.max(now, latest(state));
}

/**
 * The earliest time a decision may be made at: the newest entry's, or the time the log was last
 * pruned at if later. Before it, pairs already dropped would still count, and a clock stepped back
 * would find room they hold (a refund of the newest entry would leave only that drop to say so).
 */
function latest(stored: SlidingLogState | undefined): number {
  return Math.max(newest(stored?.log, stored?.from, stored?.end), stored?.seenAt ?? 0);
}

/**
 * The state without the pairs that left the period ending `at`: the stored state itself when none
 * did, a view of the same array otherwise, or a copy once enough stale pairs have piled up. A state
 * of another period keeps its pairs and is pruned by the new one.
 */
function pruned(periodMs: number, stored: SlidingLogState | undefined, at: number): SlidingLogState {
  if (stored === undefined) return logState(periodMs, [], 0, 0, 0, 0);
  const { log, end } = stored;
  const from = firstAfter(log, stored.from, end, at - periodMs);
  if (from === stored.from && periodMs === stored.periodMs) return stored;
  const used = stored.used - unitsIn(log, stored.from, from);
  const seenAt = from === stored.from ? (stored.seenAt ?? 0) : Math.max(at, stored.seenAt ?? 0);
  if (from < 2 * STALE_PAIRS) return logState(periodMs, log, from, end, used, seenAt);
  const pairs = log.slice(from, end);
  return logState(periodMs, pairs, 0, pairs.length, used, seenAt);
}

/**
 * The state with `units` at `at`, which is at or after every entry: pushed onto the shared array
 * when this state owns its end (older states see only up to their own `end`), onto a copy otherwise.
 */
function appended(state: SlidingLogState, at: number, units: number): SlidingLogState {
  const { periodMs, log, from, end, used } = state;
  const seenAt = state.seenAt ?? 0;
  if (end === log.length) {
    log.push(at, units);
    return logState(periodMs, log, from, end + 2, used + units, seenAt);
  }
  const pairs = log.slice(from, end);
  pairs.push(at, units);
  return logState(periodMs, pairs, 0, pairs.length, used + units, seenAt);
}

/** Every state is built here, in one field order, so that all share one shape. */
function logState(periodMs: number, log: number[], from: number, end: number, used: number, seenAt: number): SlidingLogState {
  return { algorithm: "sliding-log", periodMs, log, from, end, used, seenAt };
}
