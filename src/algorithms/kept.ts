/** Which state a key's object decides from when its rule changed algorithm, and when it keeps a state carried over from another. */
import { carryOver, peek } from "./index";
import type { LimiterState, Policy } from "./types";

/** A key's state as its object keeps it, with the policy it was kept under. */
export interface Stored {
  policy: Policy;
  state: LimiterState;
  /** the state is another algorithm's carried over on a denial, nothing taken since: it is not carried back and kept (see {@link keepsCarried}) */
  carried?: true;
}

/**
 * The state to decide `policy` from. A request from a Worker version or rule with another
 * algorithm carries what the stored one used over; one naming an algorithm this version does
 * not know throws before anything changes, and its caller's `onError` decides.
 */
export function stateFor(stored: Stored | undefined, policy: Policy, now: number): LimiterState | undefined {
  return stored && carryOver(stored.policy, stored.state, policy, now);
}

/** Whether `state`, read for a decision, was carried over from the stored state of another algorithm (see {@link stateFor}). */
export function fromCarry(stored: Stored | undefined, state: LimiterState | undefined): boolean {
  return stored !== undefined && state !== stored.state;
}

/**
 * Whether to keep a state carried over from another algorithm's though nothing else changed:
 * otherwise each request would carry the old units over again, taken anew at its time, and the
 * key stay denied until the old algorithm freed them while every denial said it ends sooner. Not
 * while a live Worker version still asks under the old algorithm (`oldAsked`), nor from a state
 * that is itself such a carry: kept both ways, two versions alternating (however slowly, across
 * restarts too) would take the units anew at every switch and never free them. A state kept
 * either way ages under its own algorithm until something is taken.
 */
export function keepsCarried(stored: Stored | undefined, state: LimiterState | undefined, oldAsked: boolean): boolean {
  return fromCarry(stored, state) && !stored!.carried && !oldAsked;
}

/**
 * When the stored state may be forgotten: once the key is back to its full quota, and for a fixed
 * window a period after that, since its count still holds against another algorithm's version
 * until then (see `turnedFixedWindow`); forgotten at the turn, the other version found the key
 * empty and took a full burst. Now when there is no state.
 */
export function recoveredAt(stored: Stored | undefined, now: number): number {
  if (!stored) return now;
  const full = peek(stored.policy, stored.state, now).resetAt;
  return stored.state.algorithm === "fixed-window" && stored.state.count > 0 ? full + stored.state.periodMs : full;
}
