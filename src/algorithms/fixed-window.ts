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
  const next = allowed && cost > 0 ? windowState(policy, state.index, state.count + cost) : state;
  const remaining = Math.max(0, policy.limit - next.count);
  const start = windowStart(policy, next.index);
  const at = Math.max(now, start);
  const end = windowStart(policy, next.index + 1);
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
 * below zero, and may go above the limit (units taken without asking).
 */
export function adjustFixedWindow(
  policy: Policy,
  stored: FixedWindowState | undefined,
  units: number,
  at: number,
  now: number,
): FixedWindowState {
  const state = windowAt(policy, stored, now);
  if (windowIndex(policy, at) < state.index) return state;
  return windowState(policy, state.index, Math.max(0, state.count + units));
}

/** Units the state counts at `now`, by its own windows: its count while its window lasts. */
export function usedFixedWindow(stored: FixedWindowState, now: number): number {
  return stored.index >= windowIndex(stored, now) ? stored.count : 0;
}

/**
 * Units a fixed window's state still holds against another algorithm at `now`: its count while
 * its window lasts, and for a period after, since the window's turn frees them for the fixed
 * window alone. Carried over as used at its turn, they would be a fresh quota: a token bucket's
 * version, asking just after the turn, took a full burst on top of the window's limit, and
 * alternating the two admitted 25 in a minute where either alone admits 20.
 */
export function turnedFixedWindow(stored: FixedWindowState, now: number): number {
  return stored.index >= windowIndex(stored, now) - 1 ? stored.count : 0;
}

/** When the state's count stops holding against another algorithm (see {@link turnedFixedWindow}): the end of the window after its own. */
export function turnedAtFixedWindow(stored: FixedWindowState): number {
  return windowStart(stored, stored.index + 2);
}

/** When units decided at `now` were counted: `now`, or the window's start if the clock stepped back behind it. */
export function countedAtFixedWindow(state: FixedWindowState, now: number): number {
  return Math.max(now, windowStart(state, state.index));
}

/** The first ms of the window holding `t`: where fast-mode reports of units spent at `t` are filed. */
export function windowStartOf(policy: Windows, t: number): number {
  return windowStart(policy, windowIndex(policy, t));
}

/** The first ms after the window holding `t`. */
export function windowEndOf(policy: Windows, t: number): number {
  return windowStart(policy, windowIndex(policy, t) + 1);
}

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
  if (stored.periodMs === policy.periodMs && stored.months === policy.months) return stored.index >= index ? stored : windowState(policy, index, 0);
  return windowState(policy, index, usedFixedWindow(stored, now));
}

function windowState({ periodMs, months }: Windows, index: number, count: number): FixedWindowState {
  return { algorithm: "fixed-window", periodMs, ...(months === undefined ? {} : { months }), index, count };
}
