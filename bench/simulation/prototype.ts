/**
 * PROTOTYPE, simulator only: not floodgate's behaviour, and nothing in src/ does this.
 *
 * "budget": the object schedules every isolate's calls for a key from one call budget, and the
 * isolate answers locally until its turn.
 *
 * - The object keeps a cursor of booked call slots, 1 s ÷ BUDGET_PER_SECOND apart. Each sync books
 *   the next free slot, never sooner than one sync interval away, and the lease it grants carries
 *   that time (`nextSyncAt`) and is made to last until it, plus one interval for the way back, with
 *   HEADROOM on the demand so that an isolate's Poisson-ish traffic does not run it dry. However
 *   many isolates share a key, its object hears from them about BUDGET_PER_SECOND times a second;
 *   a key with few isolates keeps today's one-interval cadence.
 * - The isolate holds back background syncs until its time. A request its lease cannot pay for is
 *   denied locally until then (reason "cache"), as a key the object denied already is: only a key
 *   it has never synced calls on a request's path.
 * - The lease arithmetic is still floodgate's `grantLease`; the prototype only changes the
 *   request's `horizonMs` and reads the lease after it.
 */
import type { Rule } from "../../src/config/types";
import type { LocalKey } from "../../src/fast/local";
import type { ObjectSchedule, SimLease, SyncSchedule } from "./schedule";

/** Calls per key per second the object books: under the issue's 250, leaving room for cold isolates' first calls. */
export const BUDGET_PER_SECOND = 200;
/** A lease asks for this many times the isolate's recent demand over its interval. */
export const HEADROOM = 1.5;

export function budgetSchedule(rule: Rule): SyncSchedule {
  const nextAt = new WeakMap<LocalKey, number>();
  const spacing = 1000 / BUDGET_PER_SECOND;
  return {
    name: "budget",
    forObject(): ObjectSchedule {
      let cursor = Number.NEGATIVE_INFINITY;
      let booked = 0;
      return {
        beforeGrant(request, now) {
          cursor = Math.max(cursor + spacing, now + rule.syncMs);
          booked = cursor;
          // The lease must last until the isolate's next call is answered.
          return { ...request, horizonMs: Math.max(request.horizonMs, Math.ceil(HEADROOM * (booked - now + rule.syncMs))) };
        },
        afterGrant: (lease) => ({ ...lease, nextSyncAt: booked }),
      };
    },
    applied(key, lease: SimLease, now) {
      if (lease.nextSyncAt === undefined) return;
      nextAt.set(key, lease.nextSyncAt);
      // A denial holds until the isolate may call again: units freed sooner go to whoever calls first.
      if (key.blockedUntil > now) key.blockedUntil = Math.max(key.blockedUntil, lease.nextSyncAt);
    },
    mayCallNow: (key, now) => now >= (nextAt.get(key) ?? Number.NEGATIVE_INFINITY),
    instead(key, rule, now) {
      const at = nextAt.get(key);
      if (at === undefined || now >= at) return undefined;
      const wait = at - now;
      return { allowed: false, limit: rule.limit, remaining: 0, resetAt: at, moreAt: at, retryAfter: wait, reason: "cache" };
    },
  };
}
