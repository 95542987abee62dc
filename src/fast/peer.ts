/** What a key's object remembers of each fast-mode isolate (a peer), and when it may forget it. */
import { takenAtATime, type Policy } from "../algorithms";
import type { Lease } from "./lease";

/** Units a lease holds back from everyone else until its isolate reports them or it runs out. */
export interface Pin {
  lease: number;
  units: number;
  until: number;
}

/** What the object remembers of an isolate: its demand rate, its pins, and its last answer for retries. */
export interface Peer {
  /** units per ms */
  rate: number;
  /** units `rate` was measured over, up to RATE_BASIS (see `demandRate`, ./lease); absent in rows an earlier version wrote */
  basis?: number;
  seenAt: number;
  lease: Lease;
  pins: Pin[];
  /** the policy the isolate asks under (its Worker version's rule); absent in rows an earlier version wrote */
  asked?: Policy;
  /** the policy its last lease was granted under: the most restrictive one heard (see `leasePolicy`, ./peer-index) */
  under?: Policy;
}

/**
 * A peer this long past both its last sync and the one the object booked for it, holding no pins,
 * is forgotten: its retries are long over, and a vanished isolate must not weigh on every sync.
 */
export const PEER_TTL_MS = 60_000;

/**
 * Peers an object keeps until its key is due (a daily key's window end) without looking at them
 * sooner: a row each, a few hundred bytes. Past it, the object looks every PEER_TTL_MS while it has
 * peers, forgetting the silent ones; below it, an alarm a minute would cost a lightly used
 * long-window key about as many object requests as its syncs.
 */
export const PEERS_KEPT_TILL_DUE = 8;

/**
 * How long after a lease ends its isolate has to report it. A pin still unreported then is counted
 * as if every unit had been spent at the lease's end: the isolate may be gone, and counting late
 * only ever makes the window fuller than it was.
 */
export const REPORT_GRACE_MS = 10_000;

/**
 * Whether `a` admits less than `b` in the long run: a lower sustained rate (limit over period), or
 * the same rate with a smaller burst. Policies that tie are equally restrictive.
 */
export function stricter(a: Policy, b: Policy): boolean {
  const rateA = a.limit * b.periodMs;
  const rateB = b.limit * a.periodMs;
  return rateA < rateB || (rateA === rateB && a.burst < b.burst);
}

/** Whether the object still needs a peer: heard from, or booked, within the TTL, or still holding pins. */
export function isLive(peer: Peer, now: number): boolean {
  return Math.max(peer.seenAt, peer.lease.nextSyncAt ?? 0) >= now - PEER_TTL_MS || peer.pins.length > 0;
}

/** The peers worth keeping (see {@link isLive}). */
export function livePeers(peers: ReadonlyMap<string, Peer>, now: number): Map<string, Peer> {
  return new Map([...peers].filter(([, p]) => isLive(p, now)));
}

/** When the last pin stops holding anything back, reported or not; undefined when none is out. */
export function lastPinEnds(peers: ReadonlyMap<string, Peer>): number | undefined {
  const ends = [...peers.values()].flatMap((p) => p.pins.map((pin) => pin.until + REPORT_GRACE_MS));
  return ends.length ? Math.max(...ends) : undefined;
}

export function pinnedUnits(pins: readonly Pin[]): number {
  return pins.reduce((sum, p) => sum + p.units, 0);
}

/**
 * When a pin its isolate never reported, whose lease ended at `until`, is counted as spent: then,
 * by when the isolate stopped spending it. An algorithm that takes units at a time (see
 * `takenAtATime`; a token bucket refills for the time since) takes them a grace later: the isolate
 * stopped by its own clock, which may run behind the object's.
 */
export function pinSpentAt(policy: Policy, until: number, now: number): number {
  return takenAtATime(policy) ? Math.min(now, until + REPORT_GRACE_MS) : until;
}
