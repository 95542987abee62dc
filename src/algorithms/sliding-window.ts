/** Sliding-window counter: the previous fixed window weighted by its overlap, plus the current one. */
import type { Decision, Outcome, Policy, SlidingWindowState } from "./types";

/**
 * Decides one request of `cost` units at `now` (epoch ms). A denied request is not counted.
 *
 * The estimate is Cloudflare's: previous × (period − elapsed) / period + current. Every comparison
 * is made multiplied through by the period, so decisions are exact integer arithmetic.
 *
 * @example
 * const { decision, state } = slidingWindow({ algorithm: "sliding-window", limit: 10, periodMs: 60_000, burst: 10 }, undefined, 1, Date.now());
 */
export function slidingWindow(
  policy: Policy,
  stored: SlidingWindowState | undefined,
  cost: number,
  now: number,
): Outcome<SlidingWindowState> {
  const state = roll(policy.periodMs, stored, now);
  const at = Math.max(now, state.windowStart);
  const allowed = usedScaled(policy.periodMs, state, at) + cost * policy.periodMs <= policy.limit * policy.periodMs;
  const next = allowed ? { ...state, current: state.current + cost } : state;
  const decision: Decision = {
    allowed,
    limit: policy.limit,
    remaining: remaining(policy, next, at),
    resetAt: resetAt(policy.periodMs, next, at),
    retryAfter: allowed ? 0 : retryAfter(policy, next, cost, at),
  };
  if (!allowed) decision.reason = cost > policy.limit ? "cost-exceeds-capacity" : "limit";
  return { decision, state: next };
}

/**
 * Counts `units` (negative to give them back) in the fixed window that holds `at`, without a
 * decision: the Durable Object uses it to refund a request another rule denied, and to merge hits
 * an isolate admitted on its own. Counts never go below zero; hits older than the previous window
 * no longer matter and are dropped.
 */
export function adjustSlidingWindow(
  policy: Policy,
  stored: SlidingWindowState | undefined,
  units: number,
  at: number,
  now: number,
): SlidingWindowState {
  const state = roll(policy.periodMs, stored, now);
  const window = at - (at % policy.periodMs);
  if (window >= state.windowStart) return { ...state, current: Math.max(0, state.current + units) };
  if (window === state.windowStart - policy.periodMs) {
    return { ...state, previous: Math.max(0, state.previous + units) };
  }
  return state;
}

/** Moves the state to the fixed window holding `now`; a state from a later window (clock skew) stays. */
function roll(periodMs: number, stored: SlidingWindowState | undefined, now: number): SlidingWindowState {
  const windowStart = now - (now % periodMs);
  const fresh = { algorithm: "sliding-window" as const, periodMs, windowStart, previous: 0, current: 0 };
  if (!stored) return fresh;
  // A changed period realigns the windows; what was counted recently still weighs as the previous window.
  if (stored.periodMs !== periodMs) return { ...fresh, previous: stored.current };
  if (stored.windowStart >= windowStart) return stored;
  if (stored.windowStart === windowStart - periodMs) return { ...fresh, previous: stored.current };
  return fresh;
}

/** The estimated use × period at `at`, which must fall in the state's window. */
function usedScaled(periodMs: number, state: SlidingWindowState, at: number): number {
  const elapsed = at - state.windowStart;
  return state.previous * (periodMs - elapsed) + state.current * periodMs;
}

function remaining(policy: Policy, state: SlidingWindowState, at: number): number {
  const free = policy.limit * policy.periodMs - usedScaled(policy.periodMs, state, at);
  return Math.max(0, Math.floor(free / policy.periodMs));
}

/** When the estimate reaches zero: the current window's hits weigh on until the end of the next. */
function resetAt(periodMs: number, state: SlidingWindowState, at: number): number {
  if (state.current > 0) return state.windowStart + 2 * periodMs;
  if (state.previous > 0) return state.windowStart + periodMs;
  return at;
}

/**
 * The shortest wait after which this same request would be admitted if nothing else arrives: later
 * in this window as the previous one's weight fades, or in the next window, where this window's
 * count becomes the fading one. A cost above the limit never fits; it is told to wait one period.
 */
function retryAfter(policy: Policy, state: SlidingWindowState, cost: number, at: number): number {
  const { limit, periodMs } = policy;
  if (cost > limit) return periodMs;
  const elapsed = at - state.windowStart;
  const headroom = limit - state.current - cost;
  if (headroom >= 0 && state.previous > 0) {
    const earliest = periodMs - Math.floor((headroom * periodMs) / state.previous);
    if (earliest < periodMs) return earliest - elapsed;
  }
  const toNextWindow = periodMs - elapsed;
  if (state.current === 0) return toNextWindow;
  const earliestNext = periodMs - Math.floor(((limit - cost) * periodMs) / state.current);
  return toNextWindow + Math.max(0, earliestNext);
}
