/** onError "local" as arithmetic: one isolate's share of a key's limit, decided from its own counters, which the caller keeps. */
import { adjust, decide, largestCost, peek, type Decision, type LimiterState, type Policy } from "../algorithms";

/** What an isolate knows of how a key is shared: the isolates sharing it, and the units its object said were free when last heard from. */
export interface Share {
  peers: number;
  free: number;
  heardAt: number;
  /** the object's figures leave out what this isolate admitted on its own (a strict key's: nothing reports those to its object) */
  apart?: boolean;
}

/** A key of which this isolate knows nothing: one whose object has not answered here (a strict object never tells of other isolates). */
export const ALONE: Share = { peers: 1, free: Number.POSITIVE_INFINITY, heardAt: Number.NEGATIVE_INFINITY };

/**
 * How long an isolate none of whose objects for a rule has ever answered refuses by `onError`
 * "local" before it takes the whole limit as its share. A cold start's overloaded object answers
 * its queue within seconds (the simulation's 4,096 isolates: under ten), and until then thousands
 * of isolates, each taking a whole limit, would admit far past it; an outage lasts longer, and then
 * limiting on alone keeps the API up rather than refusing every request of every new isolate.
 */
export const COLD_REFUSAL_MS = 30_000;

/**
 * The isolates to divide a key's limit among when its object has never answered this isolate:
 * `ruleMost`, the most any object of the rule has reported (1 for a strict rule one of whose objects
 * has answered); none while no object of the rule has, for {@link COLD_REFUSAL_MS} after the rule
 * first failed here (`coldForMs` ago), so `local` refuses; then the isolate counts itself alone.
 */
export function unheardPeers(ruleMost: number, coldForMs: number): number {
  return ruleMost > 0 ? ruleMost : coldForMs >= COLD_REFUSAL_MS ? 1 : 0;
}

/** An isolate's own counters for one key, and the answer of the object they started from. */
export interface Counters {
  state: LimiterState;
  heardAt: number;
}

/**
 * Decides `cost` against this isolate's share of the key: the limit (and burst) divided among
 * `known.peers`. Undefined when no isolate is known (a rule none of whose objects has yet
 * answered this one, see {@link unheardPeers}): at a cold start thousands may share the key, each
 * with a whole limit as its share. See {@link startOf} for where the counters start.
 */
export function decideShare(policy: Policy, counters: Counters | undefined, cost: number, known: Share, now: number): { decision: Decision; counters: Counters } | undefined {
  const { peers } = known;
  if (peers === 0) return undefined;
  const share = { ...policy, limit: Math.max(1, Math.floor(policy.limit / peers)), burst: policy.algorithm === "gcra" ? Math.floor(policy.burst / peers) : Math.max(1, Math.floor(policy.burst / peers)) };
  const fresh = counters === undefined || counters.heardAt < known.heardAt;
  const { decision, state } = decide(share, fresh ? startOf(share, counters, known, now) : counters.state, cost, now);
  return { decision, counters: { state, heardAt: fresh ? known.heardAt : counters!.heardAt } };
}

/**
 * The counters' start once the object has answered since they began: all but the share of
 * `known.free` taken when it was given, so isolates that had spent a busy key's quota from their
 * leases get no fresh share on top of it (what the counters admitted before is in the object's
 * answer, reported as `unleased`), and what had left the key by now is not taken again. When the
 * answer leaves those out (`apart`), the counters keep their own count unless the answer says more
 * is used: an object that answers between failures never has the same units handed out twice.
 */
function startOf(share: Policy, counters: Counters | undefined, known: Share, now: number): LimiterState | undefined {
  // Out of what the object's `remaining` counts: a bucket's burst, a GCRA's burst and one, a window's limit.
  const taken = largestCost(share) - Math.floor(known.free / known.peers);
  // Taken now, a key saturated when last heard of stayed refused a whole period into the outage
  // (a fixed window's next, a daily key's next day), though its units had left.
  const told = taken > 0 ? adjust(share, undefined, taken, known.heardAt, known.heardAt) : undefined;
  return known.apart ? moreUsed(share, counters?.state, told, now) : told;
}

/** Of two states, the one with fewer units left at `now`; on a tie the first, the counters' own, which hold this isolate's admissions. */
function moreUsed(policy: Policy, a: LimiterState | undefined, b: LimiterState | undefined, now: number): LimiterState | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  return peek(policy, a, now).remaining <= peek(policy, b, now).remaining ? a : b;
}
