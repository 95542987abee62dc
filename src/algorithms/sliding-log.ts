/** Sliding log: the time of every admitted unit, so that no period ending now ever holds more than `limit`: exact, at one pair per request. */
import type { Outcome, Policy, SlidingLogState } from "./types";

/** Most units a sliding-log rule may allow per period: its state keeps up to one pair per unit. */
export const MAX_LOG_LIMIT = 1_000;

/**
 * Decides one request of `cost` units at `now` (epoch ms). The log holds the requests admitted in
 * the period ending now, (now − periodMs, now]; the request is admitted if they and it come to at
 * most `limit` units. A denied request is not logged. When the clock stepped back behind the
 * newest entry, the decision is made at that entry's time.
 *
 * @example
 * const { decision, state } = slidingLog({ algorithm: "sliding-log", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 }, undefined, 1, Date.now());
 */
export function slidingLog(policy: Policy, stored: SlidingLogState | undefined, cost: number, now: number): Outcome<SlidingLogState> {
  const at = Math.max(now, newest(stored));
  const log = pruned(policy.periodMs, stored, at);
  const used = total(log);
  const allowed = used + cost <= policy.limit;
  const next = allowed && cost > 0 ? logState(policy.periodMs, appended(log, at, cost)) : sameOrNew(policy.periodMs, stored, log);
  const usedNext = allowed ? used + cost : used;
  const remaining = Math.max(0, policy.limit - usedNext);
  const resetAt = next.log.length > 0 ? next.log[next.log.length - 2]! + policy.periodMs : at;
  // More comes when enough of the oldest units leave that one more fits.
  const moreAt = remaining >= policy.limit ? at : leftBy(policy.periodMs, next.log, usedNext - (policy.limit - remaining - 1));
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the limit never fits; it is told to wait one period rather than forever.
  const fits = cost <= policy.limit;
  const retryAfter = fits ? leftBy(policy.periodMs, next.log, used + cost - policy.limit) - now : policy.periodMs;
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
  const latest = Math.max(now, newest(stored));
  const log = pruned(policy.periodMs, stored, latest);
  const when = Math.min(at, latest);
  if (units === 0 || when <= latest - policy.periodMs) return sameOrNew(policy.periodMs, stored, log);
  if (units > 0) return logState(policy.periodMs, inserted(log, when, units));
  const next = log.slice();
  let owed = -units;
  for (let i = next.length - 2; i >= 0 && owed > 0; i -= 2) {
    if (next[i]! > when) continue;
    const take = Math.min(owed, next[i + 1]!);
    next[i + 1]! -= take;
    owed -= take;
  }
  return logState(policy.periodMs, next.filter((_, i) => (i % 2 === 0 ? next[i + 1]! > 0 : next[i]! > 0)));
}

/** Units the log holds in the period ending `now`, by the state's own period: what a change of rule carries over. */
export function usedSlidingLog(stored: SlidingLogState, now: number): number {
  return total(pruned(stored.periodMs, stored, Math.max(now, newest(stored))));
}

/** When units decided at `now` were logged: `now`, or the newest entry's time if the clock stepped back behind it. */
export function countedAtSlidingLog(state: SlidingLogState, now: number): number {
  return Math.max(now, newest(state));
}

function newest(state: SlidingLogState | undefined): number {
  return state !== undefined && state.log.length > 0 ? state.log[state.log.length - 2]! : Number.NEGATIVE_INFINITY;
}

/** The pairs still inside the period ending `at`; the stored array itself when none left. */
function pruned(periodMs: number, stored: SlidingLogState | undefined, at: number): number[] {
  if (stored === undefined) return [];
  const { log } = stored;
  let from = 0;
  while (from < log.length && log[from]! <= at - periodMs) from += 2;
  return from === 0 ? log : log.slice(from);
}

function total(log: readonly number[]): number {
  let sum = 0;
  for (let i = 1; i < log.length; i += 2) sum += log[i]!;
  return sum;
}

/**
 * The ms at which the oldest `excess` units have all left the period (an entry at t leaves at
 * t + periodMs). `excess` must be positive and at most what the log holds.
 */
function leftBy(periodMs: number, log: readonly number[], excess: number): number {
  let gone = 0;
  for (let i = 0; i < log.length; i += 2) {
    gone += log[i + 1]!;
    if (gone >= excess) return log[i]! + periodMs;
  }
  // Unreachable when the excess is at most what the log holds.
  return (log.length > 0 ? log[log.length - 2]! : 0) + periodMs;
}

/** A new log with `units` at `at`, which is at or after every entry. */
function appended(log: readonly number[], at: number, units: number): number[] {
  const next = log.slice();
  if (next.length > 0 && next[next.length - 2] === at) next[next.length - 1]! += units;
  else next.push(at, units);
  return next;
}

/** A new log with `units` at `at`, in time order. */
function inserted(log: readonly number[], at: number, units: number): number[] {
  let i = log.length;
  while (i > 0 && log[i - 2]! > at) i -= 2;
  if (i > 0 && log[i - 2] === at) {
    const next = log.slice();
    next[i - 1]! += units;
    return next;
  }
  return [...log.slice(0, i), at, units, ...log.slice(i)];
}

function sameOrNew(periodMs: number, stored: SlidingLogState | undefined, log: number[]): SlidingLogState {
  return stored !== undefined && stored.log === log && stored.periodMs === periodMs ? stored : logState(periodMs, log);
}

function logState(periodMs: number, log: number[]): SlidingLogState {
  return { algorithm: "sliding-log", periodMs, log };
}
