/** Which state a key's object decides from when its rule changed, and what it keeps of the rule before. */
import { adjust, carryOver, largestCost, peek, usedUnits } from "./index";
import type { LimiterState, Policy } from "./types";

/** A key's state as its object keeps it, with the policy it was kept under. */
export interface Stored {
  policy: Policy;
  state: LimiterState;
  /** the state is another algorithm's carried over on a denial, nothing taken since: it is not carried back and kept (see {@link keepsCarried}) */
  carried?: true;
  /**
   * the state of the policy this one replaced (another algorithm, or the same with another shape:
   * see {@link stateShape}), counting what was taken since (see {@link keptBefore}) until it has
   * recovered by its own terms: read back when a version asks under that policy again (a rollback,
   * or two versions live at once), so that its own count is not lost to the other policy's view of
   * it (a fixed window's, carried back from a token bucket that had refilled, admitted past the
   * window's limit; a token bucket's, read back from a lowered one that started empty, found its
   * whole burst again)
   */
  before?: { policy: Policy; state: LimiterState };
}

/**
 * The state to decide `policy` from. Under another policy than the stored one's, the stored state
 * in its terms: the same algorithm reads it itself (a changed limit, period or burst), another
 * algorithm gets what it used carried over (see `carryOver`), and a token bucket or GCRA that
 * would start beyond empty starts empty instead once no live version asks under the policy it was
 * kept under (`asked`; see {@link withoutDebt}): while one does, that debt is what holds the two
 * together to the more generous one's bound. A state kept from before under the same algorithm
 * (see Stored's `before`) is read that way too, and whichever counts more used is the one decided
 * from. One naming an algorithm this version does not know throws before anything changes, and
 * its caller's `onError` decides.
 */
export function stateFor(stored: Stored | undefined, policy: Policy, now: number, asked: (policy: Policy) => boolean): LimiterState | undefined {
  if (!stored) return undefined;
  const shape = stateShape(policy);
  if (stateShape(stored.policy) === shape) return stored.state;
  const carried = viewUnder(stored, policy, shape, now, asked);
  const before = stored.before;
  if (!before || before.policy.algorithm !== policy.algorithm) return carried;
  const own = viewUnder(before, policy, shape, now, asked);
  return carried === undefined || (own !== undefined && usedUnits(policy, own, now) >= usedUnits(policy, carried, now)) ? own : carried;
}

/** A kept state as `policy`, of the shape `shape`, reads it (see {@link stateFor}). */
function viewUnder(kept: { policy: Policy; state: LimiterState }, policy: Policy, shape: string, now: number, asked: (policy: Policy) => boolean): LimiterState | undefined {
  if (stateShape(kept.policy) === shape) return kept.state;
  const carried = carryOver(kept.policy, kept.state, policy, now);
  return asked(kept.policy) ? carried : withoutDebt(policy, carried);
}

/** The fields by which a policy reads a stored state: two policies alike in these read any state alike. */
export function stateShape(policy: Policy): string {
  return `${policy.algorithm} ${policy.limit} per ${policy.periodMs} ms, burst ${policy.burst}, ${policy.buckets} buckets, warmup ${policy.warmupMs ?? 0} ms`;
}

/**
 * A token bucket's or GCRA's state, read under another policy, with no more taken than `policy`
 * can ever hold at the state's own time: one counting more starts spent (empty) then, and refills
 * from there. The debt was run up under a rule that allowed it; kept, 1,000 units taken under
 * 1,000 a minute locked the key out for 99 minutes under 10 a minute, where a window's count
 * frees within its period. What the old rule itself still counts is kept from before (Stored's
 * `before`), so that rule, rolled back or returning, finds no fresh quota.
 */
export function withoutDebt(policy: Policy, state: LimiterState | undefined): LimiterState | undefined {
  if (state?.algorithm !== "token-bucket" && state?.algorithm !== "gcra") return state;
  const capacity = largestCost(policy);
  const at = state.updatedAt;
  return usedUnits(policy, state, at) > capacity ? adjust(policy, undefined, capacity, at, at) : state;
}

/**
 * What is kept of the policy a decision under `policy` replaced (see Stored's `before`) once it
 * took `units` at `now`: the stored state, if it is another policy's, or the one kept before,
 * counting them as far as it has room, until it has recovered by its own terms (see
 * {@link keptUntil}); else none. Never a concurrency rule's, nor beside one: its slots are requests
 * in flight, each given back by its own request, and units another algorithm took would be slots
 * nothing gives back.
 */
export function keptBefore(stored: Stored | undefined, policy: Policy, units: number, now: number): Stored["before"] {
  const shape = stateShape(policy);
  const other = stored && (stateShape(stored.policy) !== shape ? { policy: stored.policy, state: stored.state } : stored.before);
  if (!other || stateShape(other.policy) === shape || keptUntil(other, now) <= now) return undefined;
  if (other.policy.algorithm === "concurrency" || policy.algorithm === "concurrency") return undefined;
  // Counted up to what it has room for: a token bucket's kept state, counting every unit the other
  // version took, ran into a debt that locked its own version out for hours after the overlap.
  const counted = Math.min(units, peek(other.policy, other.state, now).remaining);
  return counted > 0 ? { policy: other.policy, state: adjust(other.policy, other.state, counted, now, now) } : other;
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
  return Math.max(...[stored, ...(stored.before ? [stored.before] : [])].map((kept) => keptUntil(kept, now)));
}

/** When one kept state has recovered (see {@link recoveredAt}): back to its full quota, a fixed window's a period past its window's turn. */
function keptUntil({ policy, state }: { policy: Policy; state: LimiterState }, now: number): number {
  // From the state's own window: read at a later time, its window is a fresh one, whose end moves on with the clock.
  if (state.algorithm === "fixed-window") return state.count > 0 ? (state.index + 2) * state.periodMs : now;
  return peek(policy, state, now).resetAt;
}
