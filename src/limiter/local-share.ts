/** onError "local" as arithmetic: one isolate's share of a key's limit, decided from its own counters, which the caller keeps. */
import { adjust, decide, largestCost, type Decision, type LimiterState, type Policy } from "../algorithms";

/** What an isolate knows of how a key is shared: the isolates sharing it, and the units its object said were free when last heard from. */
export interface Share {
  peers: number;
  free: number;
  heardAt: number;
}

/** A strict key's: its object never tells an isolate about the others. */
export const ALONE: Share = { peers: 1, free: Number.POSITIVE_INFINITY, heardAt: Number.NEGATIVE_INFINITY };

/** An isolate's own counters for one key, and the answer of the object they started from. */
export interface Counters {
  state: LimiterState;
  heardAt: number;
}

/**
 * Decides `cost` against this isolate's share of the key: the limit (and burst) divided among
 * `known.peers`. Counters start afresh whenever the object has answered since they began: with all
 * but the share of `known.free` taken, so isolates that had spent a busy key's quota from their
 * leases get no fresh share on top of it (what the counters admitted before is in the object's
 * answer, reported as `unleased`). Undefined when no isolate is known (a fast rule none of whose
 * objects has yet answered this one): at a cold start thousands may share the key, each with a
 * whole limit as its share.
 */
export function decideShare(policy: Policy, counters: Counters | undefined, cost: number, known: Share, now: number): { decision: Decision; counters: Counters } | undefined {
  const { peers, free, heardAt } = known;
  if (peers === 0) return undefined;
  const share = { ...policy, limit: Math.max(1, Math.floor(policy.limit / peers)), burst: policy.algorithm === "gcra" ? Math.floor(policy.burst / peers) : Math.max(1, Math.floor(policy.burst / peers)) };
  // Out of what the object's `remaining` counts: a bucket's burst, a GCRA's burst and one, a window's limit.
  const taken = largestCost(share) - Math.floor(free / peers);
  const fresh = counters === undefined || counters.heardAt < heardAt;
  const start = fresh ? (taken > 0 ? adjust(share, undefined, taken, now, now) : undefined) : counters.state;
  const { decision, state } = decide(share, start, cost, now);
  return { decision, counters: { state, heardAt: fresh ? heardAt : counters.heardAt } };
}
