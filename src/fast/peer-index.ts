/**
 * A key's peers with the figures every sync reads kept up to date as rows change (units pinned,
 * the active peers and their demand, the strictest live policy, pins due for settlement), so a sync
 * costs the object the same at 5,000 peers as at 5. Each answer equals a walk of every peer's row.
 */
import { adjust, type LimiterState, type Policy } from "../algorithms";
import { policyKey } from "../config/policy";
import { addExact, emptySum, roundSum, type ExactSum } from "./exact-sum";
import { popHeap, pushHeap } from "./min-heap";
import { isLive, PEER_TTL_MS, pinnedUnits, pinSpentAt, REPORT_GRACE_MS, stricter, type Peer } from "./peer";

/** Members that each leave once a rising threshold passes their key. A heap entry whose key is no longer its member's is stale. */
interface Timeline {
  heap: { key: number; id: string }[];
  members: Map<string, number>;
}

/** The peers active for one sync interval: seen within two of them, or booked to call within one (see `grantLease`). */
interface Activity {
  horizonMs: number;
  seen: Timeline;
  booked: Timeline;
  count: number;
  rate: ExactSum;
}

export interface PeerIndex {
  /** the rows, in the order of their first insertion: the order a walk of them takes */
  peers: Map<string, Peer>;
  /** each peer's place in that order, in which late pins are settled */
  places: Map<string, number>;
  nextPlace: number;
  /** units every pin holds (whole units, so a running sum is exact) */
  pinned: number;
  /** peers holding a pin */
  holders: number;
  /** pins by when they fall due for settlement, until + REPORT_GRACE_MS */
  due: { key: number; id: string; lease: number }[];
  /** live peers holding no pin, by max(seenAt, nextSyncAt); a peer holding a pin is live regardless */
  live: Timeline;
  /** live peers by the policy they ask under, keyed by its JSON: a key has a policy or two */
  asked: Map<string, { policy: Policy; live: number }>;
  /** by the sync interval syncs asked with lately, most recent first (at most MAX_HORIZONS) */
  activity: Activity[];
  /** the latest time the figures were brought to; an earlier one rebuilds them */
  now: number;
}

/**
 * Sync intervals followed at once. A key's isolates sync at their rule's interval, so there is one,
 * or two while Worker versions with different intervals share the key; past this many, the one
 * used longest ago is dropped and built again, by a walk, when next asked.
 */
const MAX_HORIZONS = 4;

/** An index of `peers`, in their order. */
export function indexPeers(peers: ReadonlyMap<string, Peer> = new Map(), now = Number.NEGATIVE_INFINITY): PeerIndex {
  const index: PeerIndex = { peers: new Map(), places: new Map(), nextPlace: 0, pinned: 0, holders: 0, due: [], live: timeline(), asked: new Map(), activity: [], now };
  for (const [id, peer] of peers) putPeer(index, id, peer, now);
  return index;
}

/** Sets a peer's row, a new peer going last. */
export function putPeer(index: PeerIndex, id: string, peer: Peer, now: number): void {
  advance(index, now);
  const before = index.peers.get(id);
  if (before) withdraw(index, id, before);
  else index.places.set(id, index.nextPlace++);
  index.peers.set(id, peer);
  enter(index, id, peer, now);
  for (const pin of peer.pins) {
    if (!before?.pins.some((p) => p.lease === pin.lease && p.until === pin.until)) pushHeap(index.due, { key: pin.until + REPORT_GRACE_MS, id, lease: pin.lease });
  }
}

export function removePeer(index: PeerIndex, id: string): void {
  const before = index.peers.get(id);
  if (!before) return;
  withdraw(index, id, before);
  index.peers.delete(id);
  index.places.delete(id);
}

/**
 * Counts every pin whose isolate missed its report by REPORT_GRACE_MS (or, with `every`, every pin)
 * as spent at the lease's end, and forgets it, peer by peer in their order. The object runs this on
 * every sync and alarm; `before` holds the rows it rewrote as they were, so that a caller keeping
 * the old rows can put them back.
 */
export function settlePins(policy: Policy, stored: LimiterState | undefined, index: PeerIndex, now: number, every = false): { state: LimiterState | undefined; before: Map<string, Peer> } {
  advance(index, now);
  const ids = every ? [...index.peers].filter(([, p]) => p.pins.length > 0).map(([id]) => id) : duePeers(index, now);
  let state = stored;
  const before = new Map<string, Peer>();
  for (const id of ids) {
    const peer = index.peers.get(id)!;
    const late = peer.pins.filter((p) => every || p.until + REPORT_GRACE_MS <= now);
    for (const pin of late) if (pin.units > 0) state = adjust(policy, state, pin.units, pinSpentAt(policy, pin.until, now), now);
    before.set(id, peer);
    putPeer(index, id, { ...peer, pins: peer.pins.filter((p) => !late.includes(p)) }, now);
  }
  return { state, before };
}

/**
 * The policy a lease is granted under: the caller's, unless a live peer (see `isLive`) or a strict
 * decision the object heard recently (`heard`) asked under a stricter one. During a gradual
 * deployment two Worker versions share the key's object: a limit lowered in the new version then
 * binds the old version's isolates from their next sync, and a raise takes effect once no isolate
 * of the old version has been live for PEER_TTL_MS.
 */
export function leasePolicy(asked: Policy, isolate: string, index: PeerIndex, now: number, heard: readonly Policy[] = []): Policy {
  advance(index, now);
  expire(index.live, now - PEER_TTL_MS, (id) => countAsked(index, index.peers.get(id)!.asked, -1));
  const self = index.peers.get(isolate);
  const selfKey = self?.asked && (self.pins.length > 0 || index.live.members.has(isolate)) ? policyKey(self.asked) : undefined;
  let best: Policy | undefined;
  let tied = 0;
  for (const [key, { policy, live }] of index.asked) {
    if (live - (key === selfKey ? 1 : 0) <= 0) continue;
    if (!best || stricter(policy, best)) [best, tied] = [policy, 1];
    else if (!stricter(best, policy)) tied++;
  }
  // Of two equally strict policies a walk takes the first peer's: rare (two versions alike but for the algorithm), so walked.
  let strictest = !best || !stricter(best, asked) ? asked : tied > 1 ? walkStrictest(asked, isolate, index.peers, now) : best;
  for (const policy of heard) if (stricter(policy, strictest)) strictest = policy;
  return strictest;
}

/** How many peers are active for `horizonMs` (the caller, at `rate`, counted as one) and their demand together, units a ms. */
export function demand(index: PeerIndex, isolate: string, rate: number, horizonMs: number, now: number): { active: number; totalRate: number } {
  advance(index, now);
  const activity = activityFor(index, horizonMs, now);
  const self = index.peers.get(isolate);
  const counted = self !== undefined && (activity.seen.members.has(isolate) || activity.booked.members.has(isolate));
  const others = counted ? addExact(activity.rate, self.rate, -1) : activity.rate;
  return { active: 1 + activity.count - (counted ? 1 : 0), totalRate: roundSum(addExact(others, rate, 1)) };
}

function walkStrictest(asked: Policy, isolate: string, peers: ReadonlyMap<string, Peer>, now: number): Policy {
  let strictest = asked;
  for (const [id, peer] of peers) {
    if (id !== isolate && peer.asked && stricter(peer.asked, strictest) && isLive(peer, now)) strictest = peer.asked;
  }
  return strictest;
}

/** The peers holding a pin due by `now`, in their order. */
function duePeers(index: PeerIndex, now: number): string[] {
  const ids = new Set<string>();
  while (index.due.length > 0 && index.due[0]!.key <= now) {
    const { key, id, lease } = popHeap(index.due)!;
    if (index.peers.get(id)?.pins.some((p) => p.lease === lease && p.until + REPORT_GRACE_MS === key)) ids.add(id);
  }
  return [...ids].sort((a, b) => index.places.get(a)! - index.places.get(b)!);
}

/** A time earlier than the figures were brought to would need members back that have left: they are built again from the rows. */
function advance(index: PeerIndex, now: number): void {
  if (now < index.now) {
    index.pinned = 0;
    index.holders = 0;
    index.due = [];
    index.live = timeline();
    index.asked = new Map();
    index.activity = index.activity.map((a) => activity(a.horizonMs));
    for (const [id, peer] of index.peers) {
      enter(index, id, peer, now);
      for (const pin of peer.pins) pushHeap(index.due, { key: pin.until + REPORT_GRACE_MS, id, lease: pin.lease });
    }
  }
  index.now = now;
}

function enter(index: PeerIndex, id: string, peer: Peer, now: number): void {
  index.pinned += pinnedUnits(peer.pins);
  if (peer.pins.length > 0) index.holders++;
  // isLive, with the key it is judged by kept to find when it stops being live
  const key = Math.max(peer.seenAt, peer.lease.nextSyncAt ?? 0);
  const live = peer.pins.length > 0 || key >= now - PEER_TTL_MS;
  if (live && peer.pins.length === 0) join(index.live, id, key);
  if (live) countAsked(index, peer.asked, 1);
  for (const a of index.activity) enterActivity(a, id, peer, now);
}

function withdraw(index: PeerIndex, id: string, peer: Peer): void {
  index.pinned -= pinnedUnits(peer.pins);
  if (peer.pins.length > 0) index.holders--;
  const live = index.live.members.delete(id) || peer.pins.length > 0;
  if (live) countAsked(index, peer.asked, -1);
  for (const a of index.activity) {
    const seen = a.seen.members.delete(id);
    if (a.booked.members.delete(id) || seen) {
      a.count--;
      a.rate = addExact(a.rate, peer.rate, -1);
    }
  }
}

function countAsked(index: PeerIndex, policy: Policy | undefined, by: 1 | -1): void {
  if (!policy) return;
  const key = policyKey(policy);
  const entry = index.asked.get(key) ?? { policy, live: 0 };
  entry.live += by;
  if (entry.live > 0) index.asked.set(key, entry);
  else index.asked.delete(key);
}

function activityFor(index: PeerIndex, horizonMs: number, now: number): Activity {
  let found = index.activity.find((a) => a.horizonMs === horizonMs);
  if (found) {
    index.activity = [found, ...index.activity.filter((a) => a !== found)];
  } else {
    found = activity(horizonMs);
    for (const [id, peer] of index.peers) enterActivity(found, id, peer, now);
    index.activity = [found, ...index.activity].slice(0, MAX_HORIZONS);
  }
  const { seen, booked } = found;
  const leave = (other: Timeline) => (id: string) => {
    if (other.members.has(id)) return;
    found.count--;
    found.rate = addExact(found.rate, index.peers.get(id)!.rate, -1);
  };
  // The walk's test, term by term: p.seenAt >= now - 2 * horizonMs || p.lease.nextSyncAt >= now - horizonMs.
  expire(seen, now - 2 * horizonMs, leave(booked));
  expire(booked, now - horizonMs, leave(seen));
  return found;
}

function enterActivity(a: Activity, id: string, peer: Peer, now: number): void {
  const seen = peer.seenAt >= now - 2 * a.horizonMs;
  const booked = peer.lease.nextSyncAt >= now - a.horizonMs;
  if (seen) join(a.seen, id, peer.seenAt);
  if (booked) join(a.booked, id, peer.lease.nextSyncAt);
  if (seen || booked) {
    a.count++;
    a.rate = addExact(a.rate, peer.rate, 1);
  }
}

function activity(horizonMs: number): Activity {
  return { horizonMs, seen: timeline(), booked: timeline(), count: 0, rate: emptySum() };
}

function timeline(): Timeline {
  return { heap: [], members: new Map() };
}

function join(line: Timeline, id: string, key: number): void {
  line.members.set(id, key);
  pushHeap(line.heap, { key, id });
}

/** Takes out every member whose key is below `threshold`, handing each to `gone`. */
function expire(line: Timeline, threshold: number, gone: (id: string) => void): void {
  while (line.heap.length > 0 && line.heap[0]!.key < threshold) {
    const { key, id } = popHeap(line.heap)!;
    if (line.members.get(id) !== key) continue;
    line.members.delete(id);
    gone(id);
  }
}
