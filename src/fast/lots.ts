/** A fast key's leased lots as the isolate holds them: spending them, ending them, and queuing what each reports. */
import type { Spent } from "./lease";
import type { LocalKey } from "./local";

/** A lease as the isolate holds it: units it may still spend until `expiresAt`, and what it spent, not yet reported. */
export interface Lot {
  lease: number;
  units: number;
  expiresAt: number;
  spent: Spent[];
  /**
   * units given back into it (see `refundLocally`), by the slot they were spent in, and until when
   * that slot counts them in full: their count there is what holds them back from the other
   * isolates until the object hears of them and pins them, so they are spent no later (see {@link expireLots})
   */
  back?: (Spent & { until: number })[];
}

/** Ends every lot: the next sync reports what each spent and gives back the rest. */
export function endLots(key: LocalKey): void {
  for (const lot of key.lots) finish(key, lot);
  key.lots = [];
}

/** Units the key's lots still hold. */
export function leaseLeft(key: LocalKey): number {
  return key.lots.reduce((sum, lot) => sum + lot.units, 0);
}

/** When the key's last lease ends; -Infinity when it holds none. */
export function leaseEnd(key: LocalKey): number {
  return key.lots.reduce((end, lot) => Math.max(end, lot.expiresAt), Number.NEGATIVE_INFINITY);
}

/**
 * Ends the lots whose lease has run out: the next sync reports what each spent and gives back the
 * rest. Units given back into a lot whose slot no longer counts them in full are taken out again,
 * reported as spent there once more: spent later, a unit given back in the last moments of a fixed
 * window of 2 went on to be spent in the next, pinned nowhere, and the window admitted 3.
 */
export function expireLots(key: LocalKey, now: number): void {
  for (const lot of key.lots) if (lot.back?.some((b) => b.until <= now)) takeBack(lot, now);
  if (key.lots.every((lot) => lot.expiresAt > now)) return;
  for (const lot of key.lots) if (lot.expiresAt <= now) finish(key, lot);
  key.lots = key.lots.filter((lot) => lot.expiresAt > now);
}

/** What is left of units given back into a lot once `units` of it are spent, those whose slot lets them go first spent first. */
function spendFirst(back: (Spent & { until: number })[], units: number): (Spent & { until: number })[] {
  let owed = units;
  const left = [];
  for (const b of [...back].sort((x, y) => x.until - y.until)) {
    const take = Math.min(b.units, owed);
    owed -= take;
    if (b.units > take) left.push({ ...b, units: b.units - take });
  }
  return left;
}

/** Takes out of the lot, as far as it still holds them, the units given back into it whose slot no longer counts them in full. */
function takeBack(lot: Lot, now: number): void {
  for (const b of lot.back!) {
    if (b.until > now) continue;
    const taken = Math.min(lot.units, b.units);
    lot.units -= taken;
    if (taken > 0) record(lot.spent, b.at, taken);
  }
  lot.back = lot.back!.filter((b) => b.until > now);
  // Emptied so, it is over, as a lot spent to its last unit is (see `spend`).
  if (lot.units === 0) lot.expiresAt = Math.min(lot.expiresAt, now);
}

/** Spends from the lots that expire first; a lot spent to the last unit is over and reported. */
export function spend(key: LocalKey, cost: number, slot: number): void {
  let owed = cost;
  for (const lot of key.lots) {
    const take = Math.min(lot.units, owed);
    lot.units -= take;
    if (take > 0) record(lot.spent, slot, take);
    // Units given back into it go first, while their slot still holds them back from the others.
    if (lot.back) lot.back = spendFirst(lot.back, take);
    owed -= take;
    if (owed === 0) break;
  }
  for (const lot of key.lots) if (lot.units === 0) finish(key, lot);
  key.lots = key.lots.filter((lot) => lot.units > 0);
}

/** Queues the lot's final report: what it spent since it last reported, and what it never will. */
function finish(key: LocalKey, lot: Lot): void {
  key.reports.push({ lease: lot.lease, spent: lot.spent, unspent: lot.units });
}

/**
 * The most entries one report keeps. A token bucket files up to 64 a period, a sliding window one
 * a bucket: an hour-long outage at a 1 s period left one sync of 230,000 entries, and a longer one
 * would have passed what one call may carry and never been heard.
 */
export const MOST_ENTRIES = 1_024;

/**
 * Adds units spent (negative: given back) at `slot` to a report, merging with the last entry for
 * the same slot. Past MOST_ENTRIES the first entry, the oldest, merges into the next at the later
 * of the two slots: counted later than they went, units never free more than on time (a window
 * holds them longer, a bucket refills less). A lease's report reaches it only when its oldest
 * entries lie 1,024 slots back, at least 16 periods for a window or a bucket, where they count no
 * more (a sliding log's lease holds at most its limit, at most 1,000, one entry each); an outage's
 * admissions, though, reach it at a sliding log within seconds, and its oldest then count later.
 */
export function record(spent: Spent[], slot: number, units: number): void {
  const last = spent.at(-1);
  if (last && last.at === slot) {
    last.units += units;
    return;
  }
  spent.push({ at: slot, units });
  if (spent.length <= MOST_ENTRIES) return;
  const [oldest, next] = spent.splice(0, 2) as [Spent, Spent];
  spent.unshift({ at: Math.max(oldest.at, next.at), units: oldest.units + next.units });
}

/** Whether the isolate holds units to give back that the object has not heard of (see `refundLocally`); a charge it owes (a negative refund) frees nothing. */
export function givesBack(key: LocalKey): boolean {
  return key.refunds.some((s) => s.units > 0);
}
