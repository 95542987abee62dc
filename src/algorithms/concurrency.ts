/** Concurrency: at most `limit` units in flight per key; a slot is held from admission until it is given back, or for `slotTtl` at most. */
import type { ConcurrencyState, Outcome, Policy } from "./types";

/** Most slots a concurrency rule may allow: its state keeps one pair per admission in flight. */
export const MAX_SLOTS = 1_000;

/**
 * What a denial tells the client to wait at most. A slot comes back the moment a response ends,
 * which no one can foresee; the earliest slot expiry is only an upper bound, often a minute away.
 */
export const RETRY_HINT_MS = 1_000;

/**
 * Decides one request of `cost` slots at `now` (epoch ms). `policy.periodMs` is the slot TTL: a
 * slot taken at t is held until it is given back ({@link adjustConcurrency} with negative units at
 * t) or until t + periodMs, whichever comes first, so an isolate that vanished with slots leaks them
 * for one TTL at most. The request is admitted if the live slots and it come to at most `limit`.
 *
 * `resetAt` and `moreAt` are when the slots expire (the newest, and enough of the oldest for one
 * more): upper bounds, since slots are usually given back sooner. A denial's `retryAfter` is the
 * sooner of {@link RETRY_HINT_MS} and that bound. When the clock stepped back behind the newest
 * slot, the decision is made at that slot's time.
 *
 * @example
 * const { decision, state } = concurrency({ algorithm: "concurrency", limit: 3, periodMs: 60_000, burst: 3, buckets: 1 }, undefined, 1, Date.now());
 */
export function concurrency(policy: Policy, stored: ConcurrencyState | undefined, cost: number, now: number): Outcome<ConcurrencyState> {
  const at = Math.max(now, newest(stored));
  const state = live(policy.periodMs, stored, at);
  const used = state.used;
  const allowed = used + cost <= policy.limit;
  const next = allowed && cost > 0 ? withSlots(state, at, cost) : state;
  const remaining = Math.max(0, policy.limit - next.used);
  const { slots } = next;
  const resetAt = slots.length > 0 ? slots[slots.length - 2]! + policy.periodMs : at;
  const moreAt = remaining >= policy.limit ? at : expiredBy(policy.periodMs, next, next.used - (policy.limit - remaining - 1));
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the limit never fits; it is told to wait one TTL rather than forever.
  const fits = cost <= policy.limit;
  const retryAfter = fits ? Math.min(RETRY_HINT_MS, expiredBy(policy.periodMs, next, used + cost - policy.limit) - now) : policy.periodMs;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter, reason }, state: next };
}

/**
 * Takes `units` slots at `at` (negative: gives them back) with no decision. Giving back is the
 * release: it frees slots taken at or before `at`, newest first, so a release at the time its
 * request was admitted frees that request's slots (or, when several were admitted that ms, as
 * many of theirs, which expire together). Slots already expired are gone; a time after the newest
 * slot and `now` (clock skew) is taken as the later of the two.
 */
export function adjustConcurrency(
  policy: Policy,
  stored: ConcurrencyState | undefined,
  units: number,
  at: number,
  now: number,
): ConcurrencyState {
  const latest = Math.max(now, newest(stored));
  const state = live(policy.periodMs, stored, latest);
  const when = Math.min(at, latest);
  if (units === 0 || when <= latest - policy.periodMs) return state;
  if (units > 0) return withSlots(state, when, units);
  const { slots } = state;
  const n = slots.length;
  // The usual release, of the newest slots: no search, one copy.
  if (n > 0 && slots[n - 2]! <= when && slots[n - 1]! >= -units) {
    const kept = slots[n - 1] === -units ? slots.slice(0, n - 2) : slots.slice();
    if (kept.length === n) kept[n - 1]! += units;
    return concurrencyState(policy.periodMs, kept, state.used + units);
  }
  const left = [...slots];
  let owed = -units;
  for (let i = n - 2; i >= 0 && owed > 0; i -= 2) {
    if (left[i]! > when) continue;
    const take = Math.min(owed, left[i + 1]!);
    left[i + 1]! -= take;
    owed -= take;
  }
  const kept = left.filter((_, i) => (i % 2 === 0 ? left[i + 1]! > 0 : left[i]! > 0));
  return concurrencyState(policy.periodMs, kept, state.used - (-units - owed));
}

/** Slots live at `now`, by the state's own TTL: what a change of rule carries over. */
export function usedConcurrency(stored: ConcurrencyState, now: number): number {
  return live(stored.periodMs, stored, Math.max(now, newest(stored))).used;
}

/** When slots decided at `now` were taken: `now`, or the newest slot's time if the clock stepped back behind it. */
export function countedAtConcurrency(state: ConcurrencyState, now: number): number {
  return Math.max(now, newest(state));
}

function newest(state: ConcurrencyState | undefined): number {
  return state !== undefined && state.slots.length > 0 ? state.slots[state.slots.length - 2]! : Number.NEGATIVE_INFINITY;
}

/** The state without the slots expired at `at`: the stored state itself when none did. A state of another TTL is pruned by the new one. */
function live(periodMs: number, stored: ConcurrencyState | undefined, at: number): ConcurrencyState {
  if (stored === undefined) return concurrencyState(periodMs, [], 0);
  const { slots } = stored;
  let from = 0;
  let used = stored.used;
  while (from < slots.length && slots[from]! <= at - periodMs) {
    used -= slots[from + 1]!;
    from += 2;
  }
  if (from === 0 && periodMs === stored.periodMs) return stored;
  return concurrencyState(periodMs, slots.slice(from), used);
}

/** The state with `units` more slots at `at`, kept in time order; slots of one ms share a pair. */
function withSlots(state: ConcurrencyState, at: number, units: number): ConcurrencyState {
  const slots = [...state.slots];
  let i = slots.length;
  while (i > 0 && slots[i - 2]! > at) i -= 2;
  if (i > 0 && slots[i - 2] === at) slots[i - 1]! += units;
  else slots.splice(i, 0, at, units);
  return concurrencyState(state.periodMs, slots, state.used + units);
}

/**
 * The ms at which the oldest `excess` slots have all expired (a slot taken at t expires at
 * t + periodMs). `excess` must be positive and at most what the state holds.
 */
function expiredBy(periodMs: number, state: ConcurrencyState, excess: number): number {
  const { slots } = state;
  let gone = 0;
  for (let i = 0; i < slots.length; i += 2) {
    gone += slots[i + 1]!;
    if (gone >= excess) return slots[i]! + periodMs;
  }
  // Unreachable when the excess is at most what the state holds.
  return (slots.length > 0 ? slots[slots.length - 2]! : 0) + periodMs;
}

/** Every state is built here, in one field order, so that all share one shape. */
function concurrencyState(periodMs: number, slots: number[], used: number): ConcurrencyState {
  return { algorithm: "concurrency", periodMs, slots, used };
}
