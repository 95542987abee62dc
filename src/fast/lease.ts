/** How a key's Durable Object shares its headroom among isolates: demand-sized leases, granted once per sync. */
import { adjust, countedAt, decide, peek } from "../algorithms";
import type { Decision, LimiterState, Policy } from "../algorithms";
import { nextBucketStart } from "../algorithms/sliding-window";

/** Units an isolate took in one lease and did not spend, returned to the bucket they were counted in. */
export interface Returned {
  units: number;
  countedAt: number;
}

/** One reconciliation from one isolate. (isolate, seq) identifies it: a retry is answered, not applied again. */
export interface SyncRequest {
  isolate: string;
  seq: number;
  returns: Returned[];
  /** units asked of this isolate for the key (admitted or not) since its last sync, over elapsedMs */
  demand: number;
  elapsedMs: number;
  /** units the requests waiting on this key need now, together; 0 when none waits */
  need: number;
  /** how long the lease should last: one sync interval, or several for a key far from its limit */
  horizonMs: number;
  /** the isolate is letting the key go (evicted): settle what it carries, lease nothing */
  release?: boolean;
}

/** Units the isolate may admit on its own until `expiresAt`, counted at the object when granted. */
export interface Lease {
  seq: number;
  units: number;
  countedAt: number;
  expiresAt: number;
  /** the key's global standing after the grant; when `units` < need, a denial with its retryAfter */
  standing: Decision;
  /** isolates that synced recently, this one included */
  peers: number;
}

/** What the object remembers of an isolate: its demand rate, and its last answer for retries. */
export interface Peer {
  /** units per ms */
  rate: number;
  seenAt: number;
  lease: Lease;
}

/** A peer silent for this long is forgotten: its retries are long over. */
export const PEER_TTL_MS = 10 * 60_000;

/**
 * Applies one sync. Returned units go back first; then the isolate is granted what it needs now
 * (what is left, if that is less: its waiting requests are served as far as that goes) plus
 * enough for its recent demand over the horizon, but never more than its demand-weighted share of
 * what is left, so a busy isolate gets more and an idle one holds nothing. Granted units are
 * counted at once, as the strict path would count them: whatever the isolates do with their
 * leases, the object never admits more than the limit. A lease ends after the horizon the isolate
 * asked for, and on a sliding window by the close of the bucket that counted it, so units are
 * spent there.
 */
export function grantLease(
  policy: Policy,
  stored: LimiterState | undefined,
  peers: ReadonlyMap<string, Peer>,
  sync: SyncRequest,
  now: number,
): { state: LimiterState | undefined; peer: Peer; lease: Lease } {
  const known = peers.get(sync.isolate);
  if (known && known.lease.seq >= sync.seq) return { state: stored, peer: known, lease: known.lease };
  let state = stored;
  // A token bucket that refilled to the brim while tokens were out on lease would overflow if they
  // came back now: unspent leased tokens are forfeited instead (a small, bounded under-admission).
  if (policy.algorithm === "sliding-window") {
    for (const back of sync.returns) state = adjust(policy, state, -back.units, back.countedAt, now);
  }
  const rate = sync.elapsedMs > 0 ? sync.demand / sync.elapsedMs : 0;
  const active = [...peers].filter(([id, p]) => id !== sync.isolate && p.seenAt >= now - 2 * sync.horizonMs);
  const totalRate = active.reduce((sum, [, p]) => sum + p.rate, rate);
  const available = peek(policy, state, now).remaining;
  const fairShare = totalRate > 0 ? (available * rate) / totalRate : available / (active.length + 1);
  // A key far from its limit can spare more than the recent demand: a sixteenth of an even share
  // spares a quiet or cold isolate a call per request, and is nothing to a key near its limit.
  const slack = Math.floor(available / (16 * (active.length + 1)));
  const wanted = Math.max(sync.need, Math.min(Math.ceil(fairShare), Math.max(Math.ceil(rate * sync.horizonMs), slack)));
  const units = sync.release ? 0 : Math.min(available, wanted);
  if (units > 0) state = decide(policy, state, units, now).state;
  const standing =
    units >= sync.need || sync.need === 0 ? peek(policy, state, now) : decide(policy, state, sync.need, now).decision;
  const lease: Lease = {
    seq: sync.seq,
    units,
    countedAt: state ? countedAt(policy, state, now) : now,
    expiresAt:
      policy.algorithm === "sliding-window" ? Math.min(now + sync.horizonMs, nextBucketStart(policy, now)) : now + sync.horizonMs,
    standing,
    peers: active.length + 1,
  };
  return { state, peer: { rate, seenAt: now, lease }, lease };
}

/** The peers worth keeping: those heard from within the TTL. */
export function livePeers(peers: ReadonlyMap<string, Peer>, now: number): Map<string, Peer> {
  return new Map([...peers].filter(([, p]) => p.seenAt >= now - PEER_TTL_MS));
}
