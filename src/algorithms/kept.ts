/** Which state a key's object decides from when its rule changed algorithm, and when it keeps a state carried over from another. */
import { adjust, carryOver, peek, usedUnits } from "./index";
import { turnedAtFixedWindow } from "./fixed-window";
import type { LimiterState, Policy } from "./types";

/** A key's state as its object keeps it, with the policy it was kept under. */
export interface Stored {
  policy: Policy;
  state: LimiterState;
  /** the state is another algorithm's carried over on a denial, nothing taken since: it is not carried back and kept (see {@link keepsCarried}) */
  carried?: true;
  /**
   * the state of the algorithm this one replaced, while a live Worker version still asks under it,
   * counting what was taken since (see {@link keptBefore}): read back when that version asks again,
   * so that its own count is not lost to the other algorithm's view of it (a fixed window's, carried
   * back from a token bucket that had refilled, admitted past the window's limit)
   */
  before?: { policy: Policy; state: LimiterState };
}

/**
 * The state to decide `policy` from. A request from a Worker version or rule with another
 * algorithm carries what the stored one used over, or reads its own algorithm's state kept from
 * before (see Stored's `before`), whichever counts more used; one naming an algorithm this version
 * does not know throws before anything changes, and its caller's `onError` decides.
 */
export function stateFor(stored: Stored | undefined, policy: Policy, now: number): LimiterState | undefined {
  if (!stored) return undefined;
  const before = stored.before;
  const own = before && before.policy.algorithm === policy.algorithm && stored.policy.algorithm !== policy.algorithm ? before.state : undefined;
  // Slots are requests in flight: a rate's units, carried in as slots, held the concurrency rule's every slot a whole slotTtl while the rate version had room.
  if (policy.algorithm === "concurrency" && stored.policy.algorithm !== "concurrency") return own;
  const carried = carryOver(stored.policy, stored.state, policy, now);
  if (!own) return carried;
  return carried === undefined || usedUnits(policy, own, now) >= usedUnits(policy, carried, now) ? own : carried;
}

/**
 * What is kept of the algorithm a decision under `policy` replaced (see Stored's `before`) once it
 * took `units` at `now`: the stored state, if it is another algorithm's, or the one kept before,
 * counting them as far as it has room, while a live version still asks under that algorithm
 * (`stillAsked`); else none. Beside a concurrency rule, whose slots are requests in flight and
 * never carried over from a rate's units (see {@link stateFor}), each state is kept whoever asks:
 * a rate's counting the concurrency rule's admissions too, and a concurrency rule's as it is,
 * since units another algorithm took would be slots nothing gives back.
 */
export function keptBefore(stored: Stored | undefined, policy: Policy, units: number, now: number, stillAsked: (algorithm: string) => boolean): Stored["before"] {
  const other = stored && (stored.policy.algorithm !== policy.algorithm ? { policy: stored.policy, state: stored.state } : stored.before);
  if (!other || other.policy.algorithm === policy.algorithm) return undefined;
  if (other.policy.algorithm === "concurrency") return other;
  if (policy.algorithm !== "concurrency" && !stillAsked(other.policy.algorithm)) return undefined;
  // Counted up to what it has room for: a token bucket's kept state, counting every unit the other
  // version took, ran into a debt that locked its own version out for hours after the overlap.
  const counted = Math.min(units, peek(other.policy, other.state, now).remaining);
  return counted > 0 ? { policy: other.policy, state: adjust(other.policy, other.state, counted, now, now) } : other;
}

/** Whether `state`, read for a decision, is the one kept from before (see Stored's `before`): what changes in it is kept there. */
export function fromBefore(stored: Stored | undefined, state: LimiterState | undefined): boolean {
  return state !== undefined && stored?.before?.state === state && stored.state !== state;
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
 * empty and took a full burst. The state kept from before (Stored's `before`) likewise. Now when
 * there is no state.
 */
export function recoveredAt(stored: Stored | undefined, now: number): number {
  if (!stored) return now;
  return Math.max(...[stored, ...(stored.before ? [stored.before] : [])].map(({ policy, state }) => {
    // From the state's own window: read at a later time, its window is a fresh one, whose end moves on with the clock.
    if (state.algorithm === "fixed-window") return state.count > 0 ? turnedAtFixedWindow(state) : now;
    return peek(policy, state, now).resetAt;
  }));
}
