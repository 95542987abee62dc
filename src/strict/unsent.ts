/** What onError admitted at strict keys that their objects never counted, kept per key until the key's next call carries it there. */
import { slotOf, type Policy } from "../algorithms";
import type { Spent } from "../fast/lease";
import { LruTable } from "../fast/table";

/**
 * One onError admission no decision at the key's object counted: a request that ran out of time
 * while still in its key's line here (never sent), was turned away by a full line or an open
 * breaker or out of the line by an overloaded object's failure, or whose object's late answer
 * denied it. Counted nowhere, each let the object admit its
 * whole quota again once it answered: under overload a strict key of 300 an hour passed 330.
 * `sent` once a call has carried it: a give-back then refunds it there.
 */
export interface Unsent extends Spent {
  sent: boolean;
}

/** Keys one isolate keeps uncounted admissions for; the least recently used is forgotten first (its units then go uncounted, as before). */
const MAX_KEYS = 10_000;

const kept = new LruTable<Unsent[]>(MAX_KEYS, () => undefined);
/** units calls are carrying to each object, until they are answered (a call whose invocation was cancelled never is: its units then stay out of the local count's share, the cautious side) */
const carrying = new Map<string, number>();

/**
 * Notes `units` admitted at `at` under `policy` at the object of `object`'s tracked name that it
 * never counted: added to the last noted, when that is in the same slot (see `slotOf`), as a fast
 * key's unleased admissions are. One entry each, an outage of a busy key kept millions, and its
 * next call carried them all.
 */
export function admittedUnsent(object: string, policy: Policy, units: number, at: number): Unsent {
  // GCRA, strict-only, has no slots of its own: filed as a token bucket's, at its tick's end, the
  // later time, where it pays them off later (by the millisecond, an hour's outage kept 3.6 million).
  const slot = slotOf(policy.algorithm === "gcra" ? { ...policy, algorithm: "token-bucket" } : policy, at);
  const list = kept.get(object);
  const last = list?.at(-1);
  if (last?.at === slot) {
    last.units += units;
    return last;
  }
  const entry: Unsent = { at: slot, units, sent: false };
  if (list) list.push(entry);
  else kept.set(object, [entry]);
  return entry;
}

/**
 * Takes the key's uncounted admissions for the call about to be made to its object; `answered`
 * once it is answered, with whether it failed: what a failed call carried is kept for the next,
 * counted twice if the call was applied after all, rather than never.
 */
export function carried(object: string): { entries: Unsent[]; answered(failed: boolean): void } {
  const list = kept.get(object);
  if (!list) return { entries: [], answered: () => undefined };
  kept.delete(object);
  const entries = list.filter((entry) => entry.units > 0);
  const units = entries.reduce((sum, entry) => sum + entry.units, 0);
  for (const entry of entries) entry.sent = true;
  carrying.set(object, (carrying.get(object) ?? 0) + units);
  const answered = (failed: boolean) => {
    const left = (carrying.get(object) ?? 0) - units;
    if (left > 0) carrying.set(object, left);
    else carrying.delete(object);
    if (!failed) return;
    for (const entry of entries) entry.sent = false;
    kept.set(object, [...entries, ...(kept.get(object) ?? [])]);
  };
  return { entries, answered };
}

/** Forgets what is kept for a reset key: its next request starts from a full quota. */
export function forgetUnsent(object: string): void {
  kept.delete(object);
}

/** Units admitted at the key that its object has not counted yet: kept here, or on their way there. */
export function uncountedUnits(object: string): number {
  return (kept.peek(object) ?? []).reduce((sum, entry) => sum + entry.units, carrying.get(object) ?? 0);
}

/** Gives back `units` of an uncounted admission (another rule denied its request): the units a call already carried to the object, to refund there. */
export function unsentGivenBack(entry: Unsent, units: number): number {
  const back = Math.min(units, entry.units);
  entry.units -= back;
  return entry.sent ? back : 0;
}
