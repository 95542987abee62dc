/** Fixed window: one counter per epoch-aligned period, or per calendar month (UTC); at most `limit` units in each (so up to 2 × limit across a boundary). */
import type { FixedWindowState, Outcome, Policy } from "./types";

/** How a fixed window's periods fall: every `periodMs` from the epoch, or with `months` on the 1st of every `months`-th calendar month, UTC. */
type Windows = Pick<Policy, "periodMs" | "months">;

/**
 * Decides one request of `cost` units at `now` (epoch ms). A denied request is not counted.
 * Everything resets at the window's end, which is also `resetAt`, `moreAt` and what a denial is
 * told to wait for: the cheapest algorithm, Cloudflare's rate-limiting binding's semantics.
 *
 * @example
 * const { decision, state } = fixedWindow({ algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 }, undefined, 1, Date.now());
 */
export function fixedWindow(
  policy: Policy,
  stored: FixedWindowState | undefined,
  cost: number,
  now: number,
): Outcome<FixedWindowState> {
  const state = windowAt(policy, stored, now);
  const allowed = state.count + cost <= policy.limit;
  const next = allowed && cost > 0 ? windowState(policy, numberOf(state), state.count + cost) : state;
  const remaining = Math.max(0, policy.limit - next.count);
  const start = windowStart(policy, numberOf(next));
  const at = Math.max(now, start);
  const end = windowStart(policy, numberOf(next) + 1);
  const resetAt = next.count > 0 ? end : at;
  const moreAt = remaining >= policy.limit ? at : end;
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 }, state: next };
  // A cost above the limit never fits; it is told to wait one period rather than forever.
  const fits = cost <= policy.limit;
  const retryAfter = fits ? end - now : policy.periodMs;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter, reason }, state: next };
}

/**
 * Counts `units` taken at `at` (negative: given back) with no decision: refunds, and hits an
 * isolate admitted on its own. Units of a window already over are dropped (that window no longer
 * matters); units stamped after the current window (clock skew) count in it. Counts never go
 * below zero, and may go above the limit (units taken without asking), up to 2^53 − 1, where they
 * stay: past it a sum is no longer exact.
 */
export function adjustFixedWindow(
  policy: Policy,
  stored: FixedWindowState | undefined,
  units: number,
  at: number,
  now: number,
): FixedWindowState {
  const state = windowAt(policy, stored, now);
  if (windowIndex(policy, at) < numberOf(state)) return state;
  return windowState(policy, numberOf(state), Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, state.count + units)));
}

/** Units the state counts at `now`, by its own windows: its count while its window lasts. */
export function usedFixedWindow(stored: FixedWindowState, now: number): number {
  return numberOf(stored) >= windowIndex(stored, now) ? stored.count : 0;
}

/**
 * Units a fixed window's state still holds against another algorithm at `now`: its count while
 * its window lasts, and for a period after, since the window's turn frees them for the fixed
 * window alone. Carried over as used at its turn, they would be a fresh quota: a token bucket's
 * version, asking just after the turn, took a full burst on top of the window's limit, and
 * alternating the two admitted 25 in a minute where either alone admits 20.
 */
export function turnedFixedWindow(stored: FixedWindowState, now: number): number {
  return numberOf(stored) >= windowIndex(stored, now) - 1 ? stored.count : 0;
}

/** When the state's count stops holding against another algorithm (see {@link turnedFixedWindow}): the end of the window after its own. */
export function turnedAtFixedWindow(stored: FixedWindowState): number {
  return windowStart(stored, numberOf(stored) + 2);
}

/** When units decided at `now` were counted: `now`, or the window's start if the clock stepped back behind it. */
export function countedAtFixedWindow(state: FixedWindowState, now: number): number {
  return Math.max(now, windowStart(state, numberOf(state)));
}

/** The first ms of the window holding `t`: where fast-mode reports of units spent at `t` are filed. */
export function windowStartOf(policy: Windows, t: number): number {
  return windowStart(policy, windowIndex(policy, t));
}

/** The first ms after the window holding `t`. */
export function windowEndOf(policy: Windows, t: number): number {
  return windowStart(policy, windowIndex(policy, t) + 1);
}

/** The number of the window holding `t`: epoch periods, or calendar windows of `months` from January 1970. */
function windowIndex({ periodMs, months }: Windows, t: number): number {
  if (months === undefined) return Math.floor(t / periodMs);
  const date = new Date(t);
  return Math.floor(((date.getUTCFullYear() - 1970) * 12 + date.getUTCMonth()) / months);
}

function windowStart({ periodMs, months }: Windows, index: number): number {
  // Date.UTC carries a month past December into the years after it.
  return months === undefined ? index * periodMs : Date.UTC(1970, index * months, 1);
}

/**
 * The state for the window holding `now`. A later stored window (clock skew) stays. Windows that
 * fall otherwise (a changed period) keep the stored count while the stored window has not ended,
 * in the current window of the new period: units are held a little longer, never dropped early.
 */
function windowAt(policy: Policy, stored: FixedWindowState | undefined, now: number): FixedWindowState {
  const index = windowIndex(policy, now);
  if (stored === undefined) return windowState(policy, index, 0);
  if (stored.periodMs === policy.periodMs && stored.months === policy.months) return numberOf(stored) >= index ? stored : windowState(policy, index, 0);
  return windowState(policy, index, usedFixedWindow(stored, now));
}

/** The state's window: a calendar state's is its `month`, its `index` being for versions that know only epoch windows. */
function numberOf(state: FixedWindowState): number {
  return state.month ?? state.index;
}

/**
 * A state counting `count` in window `number`. A calendar state's `index` is the epoch window of
 * its last millisecond: a version from before calendar windows, live beside this one during a
 * deploy or after a rollback, reads it as that window and holds its count at most one period past
 * the month's end (read as an epoch window itself, month 686 was a window 13 months ahead).
 */
function windowState(windows: Windows, number: number, count: number): FixedWindowState {
  const { periodMs, months } = windows;
  if (months === undefined) return { algorithm: "fixed-window", periodMs, index: number, count };
  const index = Math.floor((windowStart(windows, number + 1) - 1) / periodMs);
  return { algorithm: "fixed-window", periodMs, months, month: number, index, count };
}
