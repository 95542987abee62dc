/** Sliding-window counter: whole buckets inside the window, plus the oldest bucket weighted by its overlap. */
import type { Outcome, Policy, SlidingWindowState } from "./types";

/**
 * Buckets per period when a rule names none: the fewest that cut wrong decisions at least 4× below
 * the two-window counter on the accuracy benchmark's trace (bench/RESULTS.md).
 */
export const DEFAULT_BUCKETS = 60;
/** More buckets than this buy no accuracy worth their state. */
export const MAX_BUCKETS = 60;

/**
 * Decides one request of `cost` units at `now` (epoch ms). A denied request is not counted.
 *
 * The period is split into `policy.buckets` epoch-aligned buckets. The estimate of what the last
 * period holds is every bucket of the current window plus the one just before it, weighted by how
 * much of it the window still overlaps. With one bucket this is Cloudflare's two-window counter,
 * previous × (period − elapsed) / period + current; more buckets confine the guess to a smaller
 * slice of time. Comparisons are multiplied through by the period: decisions are exact integers.
 *
 * @example
 * const policy = { algorithm: "sliding-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 } as const;
 * const { decision, state } = slidingWindow(policy, undefined, 1, Date.now());
 */
export function slidingWindow(
  policy: Policy,
  stored: SlidingWindowState | undefined,
  cost: number,
  now: number,
): Outcome<SlidingWindowState> {
  const state = roll(policy, stored, now);
  const start = bucketStart(policy, state.index);
  const at = now > start ? now : start;
  const used = usedScaled(policy, state, at);
  const allowed = used + cost * policy.periodMs <= policy.limit * policy.periodMs;
  let next = state;
  if (allowed) {
    // roll hands back a new state unless the bucket is unchanged; the caller's own state is never mutated.
    const counts = state === stored ? state.counts.slice() : state.counts;
    counts[policy.buckets]! += cost;
    next = { algorithm: "sliding-window", periodMs: policy.periodMs, index: state.index, counts };
  }
  const usedNext = allowed ? used + cost * policy.periodMs : used;
  const remaining = Math.max(0, Math.floor((policy.limit * policy.periodMs - usedNext) / policy.periodMs));
  const reset = resetAt(policy, next, at);
  if (allowed) return { decision: { allowed, limit: policy.limit, remaining, resetAt: reset, retryAfter: 0 }, state: next };
  const reason = cost > policy.limit ? "cost-exceeds-capacity" : "limit";
  const wait = retryAfter(policy, next, cost, at);
  return { decision: { allowed, limit: policy.limit, remaining, resetAt: reset, retryAfter: wait, reason }, state: next };
}

/**
 * Counts `units` (negative to give them back) in the bucket that holds `at`, without a decision:
 * the Durable Object uses it to refund a request another rule denied, and to merge hits an isolate
 * admitted on its own. Counts never go below zero; hits older than every kept bucket no longer
 * matter and are dropped, and hits stamped after the current bucket (clock skew) count in it.
 */
export function adjustSlidingWindow(
  policy: Policy,
  stored: SlidingWindowState | undefined,
  units: number,
  at: number,
  now: number,
): SlidingWindowState {
  const state = roll(policy, stored, now);
  const slot = Math.min(policy.buckets, policy.buckets - (state.index - bucketIndex(policy, at)));
  if (slot < 0) return state;
  const counts = state.counts.slice();
  counts[slot] = Math.max(0, counts[slot]! + units);
  return { ...state, counts };
}

/**
 * When units decided at `now` were counted in `state`, the state after the decision: `now`, or,
 * when the state is in a later bucket than `now` (the clock stepped back), the start of that
 * bucket, where {@link slidingWindow} counted them. A refund stamped with it finds them there.
 */
export function countedAtSlidingWindow(policy: Policy, state: SlidingWindowState, now: number): number {
  return Math.max(now, bucketStart(policy, state.index));
}

/** When the bucket holding `now` ends: units counted now stop being "current" then. */
export function nextBucketStart(policy: Policy, now: number): number {
  return bucketStart(policy, bucketIndex(policy, now) + 1);
}

function bucketIndex(policy: Policy, t: number): number {
  return Math.floor((t * policy.buckets) / policy.periodMs);
}

/** The first whole millisecond of a bucket (buckets need not be whole milliseconds long). */
function bucketStart(policy: Policy, index: number): number {
  return Math.ceil((index * policy.periodMs) / policy.buckets);
}

/** Moves the state to the bucket holding `now`; a state from a later bucket (clock skew) stays. */
function roll(policy: Policy, stored: SlidingWindowState | undefined, now: number): SlidingWindowState {
  const { buckets, periodMs } = policy;
  const index = bucketIndex(policy, now);
  if (stored && stored.periodMs === periodMs && stored.counts.length === buckets + 1) {
    if (stored.index >= index) return stored;
    const shift = index - stored.index;
    const counts = new Array<number>(buckets + 1);
    for (let i = 0; i <= buckets; i++) counts[i] = i + shift <= buckets ? stored.counts[i + shift]! : 0;
    return { algorithm: "sliding-window", periodMs, index, counts };
  }
  const counts = new Array<number>(buckets + 1).fill(0);
  // A reshaped window cannot keep its buckets; what was counted recently stays counted, as current.
  if (stored) counts[buckets] = stored.counts.slice(1).reduce((total, n) => total + n, 0);
  return { algorithm: "sliding-window", periodMs, index, counts };
}

/** The estimated use × period at `at`, which must fall in the state's current bucket. */
function usedScaled(policy: Policy, state: SlidingWindowState, at: number): number {
  const elapsedScaled = at * policy.buckets - state.index * policy.periodMs;
  const counts = state.counts;
  let inside = 0;
  for (let i = 1; i < counts.length; i++) inside += counts[i]!;
  return (counts[0] ?? 0) * (policy.periodMs - elapsedScaled) + inside * policy.periodMs;
}

/** When the estimate reaches zero: the newest counted bucket has then slid out of the window. */
function resetAt(policy: Policy, state: SlidingWindowState, at: number): number {
  let newest = policy.buckets;
  while (newest >= 0 && state.counts[newest]! <= 0) newest--;
  if (newest === -1) return at;
  const bucket = state.index - policy.buckets + newest;
  return bucketStart(policy, bucket + policy.buckets + 1);
}

/**
 * The shortest wait after which this same request would be admitted if nothing else arrives. The
 * estimate only falls as time passes, so the buckets ahead are tried in turn: within each, the
 * oldest bucket fades until the request fits or the next bucket begins. A cost above the limit
 * never fits; it is told to wait one period.
 */
function retryAfter(policy: Policy, state: SlidingWindowState, cost: number, at: number): number {
  const { limit, periodMs, buckets } = policy;
  if (cost > limit) return periodMs;
  const counts = state.counts;
  // after[s]: what stays inside the window once it has moved s buckets on, i.e. counts[s + 1..buckets].
  let after = 0;
  for (let i = 1; i <= buckets; i++) after += counts[i]!;
  for (let shift = 0; shift <= buckets + 1; shift++) {
    const index = state.index + shift;
    const oldest = shift <= buckets ? counts[shift]! : 0;
    const headroom = (limit - after - cost) * periodMs;
    if (shift + 1 <= buckets) after -= counts[shift + 1]!;
    if (headroom < 0) continue;
    const from = Math.max(at, bucketStart(policy, index));
    // Smallest elapsed × buckets at which oldest × (period − elapsed × buckets) ≤ headroom.
    const fadedEnough = oldest === 0 ? 0 : periodMs - Math.floor(headroom / oldest);
    const when = Math.max(from, Math.ceil((index * periodMs + fadedEnough) / buckets));
    if (when < bucketStart(policy, index + 1)) return when - at;
  }
  return periodMs;
}
