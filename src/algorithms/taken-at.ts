/** When an algorithm that takes units at a time (token bucket, GCRA) takes units reported late. */

/**
 * When units reported taken at `at` are taken: then, but no sooner than the state's last change,
 * which may already count what came after them, and no later than now (or the state's time if the
 * clock stepped back behind it). Taking a unit later than it went never frees more than taking it
 * on time would have: a bucket refills less, a GCRA's arrival time moves as far or further.
 */
/**
 * What a bucket (token bucket, GCRA) can give back of `units` × periodMs taken at `at`: the units
 * less what it has refilled at `limit` per ms since. A bucket keeps no history, so it cannot tell
 * a unit given back from one the refill has already restored: one that refilled to full while a
 * request was in flight, then was drained again, would otherwise give the same units twice. A
 * refund that comes at once (another rule denied the request) loses next to nothing; one that
 * comes a whole refill later gives back nothing, as the bucket would hold then anyway.
 *
 * @example
 * givenBack({ limit: 5, periodMs: 2_000 }, 1, 1_000, 1_200); // 2000 − 5 × 200 = 1000: half a unit
 */
export function givenBack(policy: { limit: number; periodMs: number }, units: number, at: number, now: number): number {
  return Math.max(0, units * policy.periodMs - policy.limit * Math.max(0, now - at));
}

export function takenAt(stored: { updatedAt: number } | undefined, at: number, now: number): number {
  if (!stored) return Math.min(at, now);
  return Math.min(Math.max(now, stored.updatedAt), Math.max(at, stored.updatedAt));
}
