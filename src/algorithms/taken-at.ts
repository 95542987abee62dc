/** When an algorithm that takes units at a time (token bucket, GCRA) takes units reported late. */

/**
 * When units reported taken at `at` are taken: then, but no sooner than the state's last change,
 * which may already count what came after them, and no later than now (or the state's time if the
 * clock stepped back behind it). Taking a unit later than it went never frees more than taking it
 * on time would have: a bucket refills less, a GCRA's arrival time moves as far or further.
 */
export function takenAt(stored: { updatedAt: number } | undefined, at: number, now: number): number {
  if (!stored) return Math.min(at, now);
  return Math.min(Math.max(now, stored.updatedAt), Math.max(at, stored.updatedAt));
}
