/** Timed log: (time, units) pairs in time order, flat in one array, each leaving `periodMs` after its time; what the sliding log and the concurrency limiter share. */

/** The newest entry's time in pairs[from, end), or −∞ when there is none (or no log yet). */
export function newest(pairs: readonly number[] = [], from = 0, end = pairs.length): number {
  return end > from ? pairs[end - 2]! : Number.NEGATIVE_INFINITY;
}

/** The index of the first entry in pairs[from, end) after `since`: the entries before it have left. */
export function firstAfter(pairs: readonly number[], from: number, end: number, since: number): number {
  while (from < end && pairs[from]! <= since) from += 2;
  return from;
}

/** Units in pairs[from, end). */
export function unitsIn(pairs: readonly number[], from: number, end: number): number {
  let total = 0;
  for (let i = from + 1; i < end; i += 2) total += pairs[i]!;
  return total;
}

/** Where an entry at `at` goes in time order: after every entry at or before it. */
export function insertionIndex(pairs: readonly number[], at: number): number {
  let i = pairs.length;
  while (i > 0 && pairs[i - 2]! > at) i -= 2;
  return i;
}

/** Takes up to `owed` units off the entries at or before `at`, newest first, in place; returns what it found no entry for. */
export function giveBack(pairs: number[], owed: number, at: number): number {
  for (let i = pairs.length - 2; i >= 0 && owed > 0; i -= 2) {
    if (pairs[i]! > at) continue;
    const take = Math.min(owed, pairs[i + 1]!);
    pairs[i + 1]! -= take;
    owed -= take;
  }
  return owed;
}

/** The pairs without those {@link giveBack} emptied. */
export function withoutEmpty(pairs: readonly number[]): number[] {
  return pairs.filter((_, i) => (i % 2 === 0 ? pairs[i + 1]! > 0 : pairs[i]! > 0));
}

/**
 * The ms at which the oldest `excess` units of pairs[from, end) have all left (an entry at t leaves
 * at t + periodMs). `excess` must be positive and at most what the pairs hold.
 */
export function leftBy(periodMs: number, pairs: readonly number[], from: number, end: number, excess: number): number {
  let gone = 0;
  for (let i = from; i < end; i += 2) {
    gone += pairs[i + 1]!;
    if (gone >= excess) return pairs[i]! + periodMs;
  }
  // Unreachable when the excess is at most what the pairs hold.
  return (end > from ? pairs[end - 2]! : 0) + periodMs;
}
