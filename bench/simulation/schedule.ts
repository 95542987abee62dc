/**
 * When isolates call the object: today's rule (floodgate's own `syncDue`, unchanged), or a
 * PROTOTYPE that exists only in this simulator (see prototype.ts). Both sides hook in here so the
 * rest of the simulation is the same for every schedule.
 */
import type { Decision } from "../../src/algorithms";
import type { Rule } from "../../src/config/types";
import type { Lease, SyncRequest } from "../../src/fast/lease";
import type { LocalKey } from "../../src/fast/local";

/** A lease as the simulated object hands it out: floodgate's Lease, and for a prototype the time it asks the isolate to call again. */
export type SimLease = Lease;

/** The object's side of a schedule; each object has its own. */
export interface ObjectSchedule {
  /** Before grantLease: may change the request (a prototype lengthens the lease to cover the interval it assigns). */
  beforeGrant(request: SyncRequest, now: number): SyncRequest;
  /** After grantLease: may add when the isolate should call next. */
  afterGrant(lease: Lease, now: number): SimLease;
}

export interface SyncSchedule {
  name: string;
  forObject(): ObjectSchedule;
  /** The isolate, after applyLease: may adjust its key from the prototype's fields. */
  applied(key: LocalKey, lease: SimLease, now: number): void;
  /** The isolate, when `syncDue` says a background sync is due: may hold it back. */
  mayCallNow(key: LocalKey, now: number): boolean;
  /** The isolate, when its lease cannot pay for a request: a local answer instead of a call, or undefined to call as today. */
  instead(key: LocalKey, rule: Rule, now: number): Decision | undefined;
}

const UNCHANGED: ObjectSchedule = { beforeGrant: (request) => request, afterGrant: (lease) => lease };

/** Today's design: nothing added, nothing held back. */
export const TODAY: SyncSchedule = {
  name: "today",
  forObject: () => UNCHANGED,
  applied: () => undefined,
  mayCallNow: () => true,
  instead: () => undefined,
};
