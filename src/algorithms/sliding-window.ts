/** Sliding-window counter: whole buckets inside the window, plus the oldest bucket weighted by its overlap. */
import type { Outcome, Policy, SlidingWindowState } from "./types";

/**
 * Buckets per period when a rule names none: the fewest that cut wrong decisions at least 4× below
 * the two-window counter on the accuracy benchmark's trace (bench/RESULTS.md).
 */
export const DEFAULT_BUCKETS = 60;
/** More buckets than this buy no accuracy worth their state. */
export const MAX_BUCKETS = 60;

/** What the window's arithmetic needs of a policy: its period and how it is split. */
type Shape = Pick<Policy, "periodMs" | "buckets">;

/** Pairs that left the window a history may keep before it is copied without them. */
const STALE_PAIRS = 8;

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
  // A state roll just made belongs to this decision alone, so it takes the units itself: one state per decision.
  const next = !allowed ? state : state !== stored ? counted(state, cost) : withCurrent(state, state.current + cost);
  const usedNext = allowed ? used + cost * policy.periodMs : used;
  const remaining = Math.max(0, Math.floor((policy.limit * policy.periodMs - usedNext) / policy.periodMs));
  const reset = resetAt(policy, next, at);
  if (allowed) {
    const moreAt = remaining === policy.limit ? at : nextUnitAt(policy, next, usedNext, remaining, at);
    return { decision: { allowed, limit: policy.limit, remaining, resetAt: reset, moreAt, retryAfter: 0 }, state: next };
  }
  const reason = cost > policy.limit ? "cost-exceeds-capacity" : "limit";
  const wait = retryAfter(policy, next, cost, at);
  // The usual denial asks for one unit more than is left: its wait is then also the next unit's.
  const moreAt =
    reason === "limit" && cost === remaining + 1 ? at + wait : remaining === policy.limit ? at : nextUnitAt(policy, next, usedNext, remaining, at);
  // The wait counts from `at`, later than now when the clock stepped back behind the state.
  return { decision: { allowed, limit: policy.limit, remaining, resetAt: reset, moreAt, retryAfter: reason === "limit" ? at - now + wait : wait, reason }, state: next };
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
  const { periodMs, buckets, index, history, base } = state;
  const oldest = index - buckets;
  const bucket = Math.min(index, bucketIndex(policy, at));
  if (bucket < oldest) return state;
  if (bucket === index) return withCurrent(state, Math.max(0, state.current + units));
  // A finished bucket changes: this state gets a history of its own, so no other state sees it.
  const next: number[] = [];
  let covered = 0;
  const keep = (b: number, units: number) => {
    if (units <= 0) return;
    next.push(b - oldest, units);
    if (b > oldest) covered += units;
  };
  let placed = false;
  for (let i = state.from; i < state.end; i += 2) {
    const b = base + history[i]!;
    const n = history[i + 1]!;
    if (!placed && b >= bucket) {
      placed = true;
      if (b === bucket) {
        keep(b, n + units);
        continue;
      }
      keep(bucket, units);
    }
    keep(b, n);
  }
  if (!placed) keep(bucket, units);
  return windowState(periodMs, buckets, index, next, oldest, 0, next.length, covered, state.current);
}

/**
 * When units decided at `now` were counted in `state`, the state after the decision: `now`, or,
 * when the state is in a later bucket than `now` (the clock stepped back), the start of that
 * bucket, where {@link slidingWindow} counted them. A refund stamped with it finds them there.
 */
export function countedAtSlidingWindow(policy: Policy, state: SlidingWindowState, now: number): number {
  return Math.max(now, bucketStart(policy, state.index));
}

/**
 * Whole units the state counts as used at `now`, rounded up, by the window's own shape (its
 * period and buckets, which the state carries): what a change of rule carries over.
 */
export function usedSlidingWindow(stored: SlidingWindowState, now: number): number {
  const shape: Shape = { periodMs: stored.periodMs, buckets: stored.buckets };
  const state = roll(shape, stored, now);
  const at = Math.max(now, bucketStart(shape, state.index));
  return Math.ceil(usedScaled(shape, state, at) / shape.periodMs);
}

/** The first millisecond of the bucket holding `t`. */
export function bucketStartOf(policy: Shape, t: number): number {
  return bucketStart(policy, bucketIndex(policy, t));
}

/** The last millisecond of the bucket holding `t`. */
export function bucketEndOf(policy: Shape, t: number): number {
  return bucketStart(policy, bucketIndex(policy, t) + 1) - 1;
}

function bucketIndex(policy: Shape, t: number): number {
  return Math.floor((t * policy.buckets) / policy.periodMs);
}

/** The first whole millisecond of a bucket (buckets need not be whole milliseconds long). */
function bucketStart(policy: Shape, index: number): number {
  return Math.ceil((index * policy.periodMs) / policy.buckets);
}

/**
 * Moves the state to the bucket holding `now`; a state from a later bucket (clock skew) stays. The
 * bucket that just finished is appended to the history if it counted anything: in place when this
 * state owns the history's end, otherwise into a fresh copy of the pairs still inside the window;
 * also once a few pairs have left the window, so that a stored state carries little besides them.
 */
function roll(policy: Shape, stored: SlidingWindowState | undefined, now: number): SlidingWindowState {
  const index = bucketIndex(policy, now);
  // Most decisions find their key in the bucket it is already in: this much stays small enough to inline.
  if (stored !== undefined && stored.index >= index && stored.periodMs === policy.periodMs && stored.buckets === policy.buckets) return stored;
  return rollTo(policy, stored, index, now);
}

function rollTo(policy: Shape, stored: SlidingWindowState | undefined, index: number, now: number): SlidingWindowState {
  const { buckets, periodMs } = policy;
  const fits = stored !== undefined && stored.periodMs === periodMs && stored.buckets === buckets;
  if (!fits || index - stored.index > buckets) {
    // A reshaped window cannot keep its buckets: what its own shape still counts stays counted, as current.
    const carried = !fits && stored ? usedSlidingWindow(stored, now) : 0;
    return windowState(periodMs, buckets, index, [], index, 0, 0, 0, carried);
  }
  const { history, base, end, current } = stored;
  const oldest = index - buckets;
  const wasOldest = stored.index - buckets;
  let from = stored.from;
  let covered = stored.covered + (stored.index > oldest ? current : 0);
  // Buckets up to the new oldest leave the wholly covered part; those before it leave the window.
  for (; from < end; from += 2) {
    const bucket = base + history[from]!;
    if (bucket > oldest) break;
    if (bucket > wasOldest) covered -= history[from + 1]!;
    if (bucket === oldest) break;
  }
  if (history.length === end && from < 2 * STALE_PAIRS && index - base <= 2 * buckets) {
    if (current > 0) history.push(stored.index - base, current);
    return windowState(periodMs, buckets, index, history, base, from, history.length, covered, 0);
  }
  const next: number[] = [];
  for (let i = from; i < end; i += 2) next.push(base + history[i]! - oldest, history[i + 1]!);
  if (current > 0) next.push(stored.index - oldest, current);
  return windowState(periodMs, buckets, index, next, oldest, 0, next.length, covered, 0);
}

/** Every state is built here or in {@link withCurrent}, in one field order, so that all share one shape. */
function windowState(
  periodMs: number,
  buckets: number,
  index: number,
  history: number[],
  base: number,
  from: number,
  end: number,
  covered: number,
  current: number,
): SlidingWindowState {
  return { algorithm: "sliding-window", periodMs, buckets, index, history, base, from, end, covered, current };
}

/** The same state with another count for the current bucket; the history is shared, not copied. */
function withCurrent(state: SlidingWindowState, current: number): SlidingWindowState {
  const { periodMs, buckets, index, history, base, from, end, covered } = state;
  return windowState(periodMs, buckets, index, history, base, from, end, covered, current);
}

function counted(state: SlidingWindowState, units: number): SlidingWindowState {
  state.current += units;
  return state;
}

/** Units in the window's oldest bucket, the one only partly inside it. */
function oldestCount(policy: Shape, state: SlidingWindowState): number {
  const { history, base, from } = state;
  return from < state.end && base + history[from]! === state.index - policy.buckets ? history[from + 1]! : 0;
}

/** The estimated use × period at `at`, which must fall in the state's current bucket. */
function usedScaled(policy: Shape, state: SlidingWindowState, at: number): number {
  const elapsedScaled = at * policy.buckets - state.index * policy.periodMs;
  return oldestCount(policy, state) * (policy.periodMs - elapsedScaled) + (state.covered + state.current) * policy.periodMs;
}

/** When the estimate reaches zero: the newest counted bucket has then slid out of the window. */
function resetAt(policy: Policy, state: SlidingWindowState, at: number): number {
  const { history, base, from, end } = state;
  if (state.current > 0) return bucketStart(policy, state.index + policy.buckets + 1);
  if (end > from) return bucketStart(policy, base + history[end - 2]! + policy.buckets + 1);
  return at;
}

/**
 * When `remaining` next grows by a unit: the first ms at which the estimate is at most
 * (limit − remaining − 1) × period, given `used`, the estimate × period at `at` (which must fall in
 * the state's current bucket). The estimate falls continuously: a bucket weighs in full until it
 * becomes the oldest, then fades to nothing over one bucket's length. So the buckets are taken in
 * the order they fade, skipping the empty ones, until they have shed the excess; as the excess is
 * at most one unit (more only while the key is over its limit), that is the oldest bucket and at
 * most the next one with units in it. The key must not be at its full quota (used > 0).
 */
function nextUnitAt(policy: Policy, state: SlidingWindowState, used: number, remaining: number, at: number): number {
  const { periodMs, buckets } = policy;
  let excess = used - (policy.limit - remaining - 1) * periodMs;
  // The oldest bucket fades for the rest of the current one, at `oldest` per scaled ms.
  const oldest = oldestCount(policy, state);
  if (oldest > 0) {
    const fading = oldest * (periodMs - (at * buckets - state.index * periodMs));
    if (excess <= fading) return at + Math.ceil(excess / (oldest * buckets));
    excess -= fading;
  }
  // Then each bucket with units fades over the bucket `buckets` after it: finished ones, then the current one.
  const { history, base, end } = state;
  for (let i = oldest > 0 ? state.from + 2 : state.from; i <= end; i += 2) {
    const bucket = i < end ? base + history[i]! : state.index;
    const units = i < end ? history[i + 1]! : state.current;
    if (units <= 0) continue;
    if (excess <= units * periodMs) return Math.ceil(((bucket + buckets) * periodMs + Math.ceil(excess / units)) / buckets);
    excess -= units * periodMs;
  }
  // Unreachable: every unit counted fades within the window, and the excess is at most what is counted.
  return resetAt(policy, state, at);
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
  const { history, base, end, current } = state;
  // `pair` walks the kept buckets as the window moves on; `after` is what stays wholly inside it.
  let pair = state.from;
  let after = state.covered + current;
  for (let shift = 0; shift <= buckets + 1; shift++) {
    const index = state.index + shift;
    const oldestBucket = index - buckets;
    while (pair < end && base + history[pair]! < oldestBucket) pair += 2;
    const kept = pair < end && base + history[pair]! === oldestBucket ? history[pair + 1]! : 0;
    const oldest = shift < buckets ? kept : shift === buckets ? current : 0;
    const headroom = (limit - after - cost) * periodMs;
    if (shift + 1 < buckets) {
      const next = pair + (kept > 0 ? 2 : 0);
      after -= next < end && base + history[next]! === oldestBucket + 1 ? history[next + 1]! : 0;
    } else if (shift + 1 === buckets) {
      after -= current;
    }
    if (headroom < 0) continue;
    const from = Math.max(at, bucketStart(policy, index));
    // Smallest elapsed × buckets at which oldest × (period − elapsed × buckets) ≤ headroom.
    const fadedEnough = oldest === 0 ? 0 : periodMs - Math.floor(headroom / oldest);
    const when = Math.max(from, Math.ceil((index * periodMs + fadedEnough) / buckets));
    if (when < bucketStart(policy, index + 1)) return when - at;
  }
  return periodMs;
}
