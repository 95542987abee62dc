/** Concurrency: at most `limit` units in flight per key; a slot is held from admission until it is given back, or for `slotTtl` at most. */
import { firstAfter, giveBack, insertionIndex, leftBy, newest, unitsIn, withoutEmpty } from "./timed-log";
import type { ConcurrencyState, LimiterState, Outcome, Policy } from "./types";

/** Most slots a concurrency rule may allow: its state keeps one pair per admission in flight. */
export const MAX_SLOTS = 1_000;

/**
 * What a denial tells the client to wait at most. A slot comes back the moment a response ends,
 * which no one can foresee; the earliest slot expiry is only an upper bound, often a minute away.
 */
export const RETRY_HINT_MS = 1_000;

/**
 * Decides one request of `cost` slots at `now` (epoch ms). `policy.periodMs` is the slot TTL (or
 * the stored state's, while it holds slots and its TTL is longer: see {@link withLongestTtl}): a
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
export function concurrency(asked: Policy, stored: ConcurrencyState | undefined, cost: number, now: number): Outcome<ConcurrencyState> {
  const policy = withLongestTtl(asked, stored);
  const at = Math.max(now, newest(stored?.slots));
  const state = live(policy.periodMs, stored, at);
  const used = state.used;
  const allowed = used + cost <= policy.limit;
  const next = allowed && cost > 0 ? withSlots(state, at, cost) : state;
  const remaining = Math.max(0, policy.limit - next.used);
  const { slots } = next;
  const resetAt = slots.length > 0 ? slots[slots.length - 2]! + policy.periodMs : at;
  const moreAt = remaining >= policy.limit ? at : leftBy(policy.periodMs, slots, 0, slots.length, next.used - (policy.limit - remaining - 1));
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the limit never fits; it is told to wait one TTL rather than forever.
  const fits = cost <= policy.limit;
  const retryAfter = fits ? Math.min(RETRY_HINT_MS, leftBy(policy.periodMs, slots, 0, slots.length, used + cost - policy.limit) - now) : policy.periodMs;
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
  asked: Policy,
  stored: ConcurrencyState | undefined,
  units: number,
  at: number,
  now: number,
): ConcurrencyState {
  const policy = withLongestTtl(asked, stored);
  const latest = Math.max(now, newest(stored?.slots));
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
  const owed = giveBack(left, -units, when);
  return concurrencyState(policy.periodMs, withoutEmpty(left), state.used - (-units - owed));
}

/**
 * Moves a request's `units` slots to `to`, so that a request still in flight keeps them past
 * `slotTtl` and only an isolate that vanished lets its slots expire. The slots are found at exactly
 * one of the times in `from` (the first that holds them: where they were last known to be, and
 * where renewals whose answers never came may have moved them), never at a time near it, which
 * would be another request's. Idempotent: slots already at `to` are renewed there. Takes nothing
 * anew: `undefined` when the slots are at none of these times any more (expired, or given back).
 */
export function renewConcurrency(
  asked: Policy,
  stored: ConcurrencyState | undefined,
  units: number,
  from: readonly number[],
  to: number,
  now: number,
): { state: ConcurrencyState; renewedAt: number } | undefined {
  const policy = withLongestTtl(asked, stored);
  const state = live(policy.periodMs, stored, Math.max(now, newest(stored?.slots)));
  const { slots } = state;
  const held = (t: number) => pairAt(slots, t) !== -1 && slots[pairAt(slots, t) + 1]! >= units;
  const at = from.find(held);
  if (at === undefined) return held(to) ? { state, renewedAt: to } : undefined;
  const left = slots.slice();
  left[pairAt(slots, at) + 1]! -= units;
  const kept = concurrencyState(policy.periodMs, withoutEmpty(left), state.used - units);
  return { state: withSlots(kept, to, units), renewedAt: to };
}

/** The index of the pair taken at exactly `at`; -1 when there is none. */
function pairAt(slots: readonly number[], at: number): number {
  for (let i = 0; i < slots.length; i += 2) if (slots[i] === at) return i;
  return -1;
}

/**
 * Whether a decision read `from` under a longer slot TTL than its own (see {@link withLongestTtl}):
 * the state must then be kept so, though nothing was taken, or the object's cleanup, reckoned by the
 * shorter TTL, forgets slots the longer one still holds (those of a vanished isolate came back at the
 * old TTL, where a version live since holds them for its own).
 */
export function ttlRaised(from: LimiterState | undefined, to: LimiterState): boolean {
  return from?.algorithm === "concurrency" && to.algorithm === "concurrency" && to.periodMs > from.periodMs;
}

/**
 * The state read under `policy`'s slot TTL when that is longer than its own and it holds slots:
 * what a decision that ran no algorithm (the key blocked) keeps, so that {@link ttlRaised} holds for it too.
 */
export function heldUnder(policy: Policy, state: LimiterState | undefined, now: number): LimiterState | undefined {
  if (state?.algorithm !== "concurrency" || policy.algorithm !== "concurrency" || policy.periodMs <= state.periodMs || state.slots.length === 0) return state;
  return adjustConcurrency(policy, state, 0, now, now);
}

/** Slots live at `now`, by the state's own TTL: what a change of rule carries over. */
export function usedConcurrency(stored: ConcurrencyState, now: number): number {
  return live(stored.periodMs, stored, Math.max(now, newest(stored.slots))).used;
}

/** When slots decided at `now` were taken: `now`, or the newest slot's time if the clock stepped back behind it. */
export function countedAtConcurrency(state: ConcurrencyState, now: number): number {
  return Math.max(now, newest(state.slots));
}

/**
 * The policy with the slot TTL its slots are held for: the longer of its own and the stored
 * state's while any slot is held. Two Worker versions live with different `slotTtl`s then both
 * count the other's slots as long as the longer says, and the shorter one takes over once the key
 * has none in flight; pruned by the shorter, the slots of the other's requests still in flight
 * were dropped, and the other version admitted past its limit.
 */
function withLongestTtl(policy: Policy, stored: ConcurrencyState | undefined): Policy {
  return stored !== undefined && stored.slots.length > 0 && stored.periodMs > policy.periodMs ? { ...policy, periodMs: stored.periodMs } : policy;
}

/** The state without the slots expired at `at`: the stored state itself when none did. A state of a longer TTL is pruned by it (see {@link withLongestTtl}). */
function live(periodMs: number, stored: ConcurrencyState | undefined, at: number): ConcurrencyState {
  if (stored === undefined) return concurrencyState(periodMs, [], 0);
  const { slots } = stored;
  const from = firstAfter(slots, 0, slots.length, at - periodMs);
  if (from === 0 && periodMs === stored.periodMs) return stored;
  return concurrencyState(periodMs, slots.slice(from), stored.used - unitsIn(slots, 0, from));
}

/** The state with `units` more slots at `at`, kept in time order; slots of one ms share a pair. */
function withSlots(state: ConcurrencyState, at: number, units: number): ConcurrencyState {
  const slots = [...state.slots];
  const i = insertionIndex(slots, at);
  if (i > 0 && slots[i - 2] === at) slots[i - 1]! += units;
  else slots.splice(i, 0, at, units);
  return concurrencyState(state.periodMs, slots, state.used + units);
}

/** Every state is built here, in one field order, so that all share one shape. */
function concurrencyState(periodMs: number, slots: number[], used: number): ConcurrencyState {
  return { algorithm: "concurrency", periodMs, slots, used };
}
