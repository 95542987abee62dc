/**
 * The object's lease functions as they were before the peer index (src/fast/peer-index.ts): each
 * sync walks every peer. Kept as the reference the index is proved against, verbatim but for two
 * changes: the active peers' demand is summed exactly and rounded once, as the index must (a float
 * sum depends on the order of its terms), and a call's most, an isolate's rate, a standing under
 * another version's policy and the counting of what a sync reports are lease.ts's own `fairShare`,
 * `demandRate`, `soonerUnderOthers` and `countSpent`, which the index does not touch.
 */
import { adjust, decide, mostOwed, peek, takenAtATime, type Decision, type LimiterState, type Policy } from "../../src/algorithms";
import { blockedDecision, blockStart } from "../../src/algorithms/block";
import { addExact, emptySum, roundSum } from "../../src/fast/exact-sum";
import { asFiled, countSpent, demandRate, fairShare, filedAt, isRoomy, soonerUnderOthers, type Lease, type Spent, type SyncRequest } from "../../src/fast/lease";
import { isLive, pinnedUnits, pinSpentAt, REPORT_GRACE_MS, stricter, type Peer } from "../../src/fast/peer";
import { bookSync, isSaturated } from "../../src/fast/schedule";

const SLACK_PER_DEMAND = 8;
const QUIET_GAPS = 7;
const QUIET_UNTIL_INTERVALS = 10;
const QUIET_PAST_BOOKED_INTERVALS = 4;

export function leasePolicy(asked: Policy, isolate: string, peers: ReadonlyMap<string, Peer>, now: number, heard: readonly Policy[] = []): Policy {
  let strictest = asked;
  for (const [id, peer] of peers) {
    if (id !== isolate && peer.asked && stricter(peer.asked, strictest) && isLive(peer, now)) strictest = peer.asked;
  }
  for (const policy of heard) if (stricter(policy, strictest)) strictest = policy;
  return strictest;
}

export function grantLease(
  policy: Policy,
  stored: LimiterState | undefined,
  peers: ReadonlyMap<string, Peer>,
  sync: SyncRequest,
  now: number,
  blockedUntil = 0,
  cursor = Number.NEGATIVE_INFINITY,
  askedPolicy = policy,
): { state: LimiterState | undefined; peers: Map<string, Peer>; lease: Lease; blockedUntil: number; cursor: number } {
  const known = peers.get(sync.isolate);
  if (known && known.lease.seq >= sync.seq) return { state: stored, peers: new Map(peers), lease: known.lease, blockedUntil, cursor };
  const settled = settlePins(policy, stored, peers, now);
  let state = settled.state;
  let pins = settled.peers.get(sync.isolate)?.pins ?? [];
  const counted: Spent[][] = [];
  for (const report of sync.reports) {
    const pin = pins.find((p) => p.lease === report.lease);
    // A lease already settled (counted in full) or never granted: its report would count twice.
    if (!pin) continue;
    counted.push(report.spent);
    const settledUnits = report.spent.reduce((sum, s) => sum + s.units, report.unspent);
    // Whatever the isolate has not accounted for stays pinned until REPORT_GRACE_MS settles it.
    const rest = pin.units - settledUnits;
    pins = pins.flatMap((p) => (p !== pin ? [p] : rest > 0 ? [{ ...p, units: rest }] : []));
  }
  // A window owes nothing past its period: only a bucket's own allowance is kept for it.
  const owed = Math.max(mostOwed(policy), takenAtATime(askedPolicy) ? mostOwed(askedPolicy) : 0);
  state = countSpent(policy, state, counted.flat(), sync.unleased ?? [], owed, filedAt(askedPolicy, policy, now, sync.sentAt), now);
  const under = known?.under;
  // Its pins stay until it reports them, so what it gives up now is counted as taken until then.
  const revoke = pins.length > 0 && under !== undefined && stricter(policy, under);
  let pinned = pinnedUnits(pins);
  const { rate, basis } = demandRate(known, sync);
  let rates = addExact(emptySum(), rate, 1);
  let active = 1;
  for (const [id, p] of settled.peers) {
    if (id === sync.isolate) continue;
    pinned += pinnedUnits(p.pins);
    // A peer is active while it syncs, and until the call the object booked for it is overdue.
    if (p.seenAt >= now - 2 * sync.horizonMs || p.lease.nextSyncAt >= now - sync.horizonMs) {
      active++;
      rates = addExact(rates, p.rate, 1);
    }
  }
  const totalRate = roundSum(rates);
  const available = peek(policy, withPinned(policy, state, pinned, now), now).remaining;
  const saturated = isSaturated(policy, totalRate, available, sync.horizonMs);
  const booking = bookSync(policy, cursor, active, totalRate, saturated, sync.horizonMs, now);
  const share = totalRate > 0 ? rate / totalRate : 1 / active;
  const untilCall = booking.nextSyncAt - now;
  const answerMs = sync.horizonMs / 2;
  const held = Math.max(0, Math.floor(sync.held ?? 0));
  const most = fairShare(policy, share, available + held, untilCall, answerMs);
  const expected = rate * (untilCall + answerMs);
  const forDemand = Math.ceil(expected + Math.sqrt(expected));
  // A key far from its limit can spare more than the recent demand: a sixteenth of an even share
  // spares a quiet or cold isolate a call per request, and is nothing to a key near its limit. It
  // is at most a few times that demand (or need): at a cold start the first isolates see few others,
  // and a sixteenth of the whole limit each would sit pinned, unspent, while the rest arrive.
  const slack = Math.min(Math.floor(available / (16 * active)), SLACK_PER_DEMAND * Math.max(forDemand, sync.need));
  const wanted = Math.max(sync.need, Math.min(Math.ceil(most), Math.max(forDemand, slack)) - held);
  const blocked = now < blockedUntil;
  const granted = sync.release || blocked ? 0 : Math.min(available, wanted);
  const view = withPinned(policy, state, pinned + granted, now);
  const short = granted < sync.need;
  const asked = short ? decide(policy, view, Math.min(sync.costliest ?? sync.need, sync.need), now).decision : peek(policy, view, now);
  // A denial of the waiting requests together (not the standing after a grant) starts the rule's block, if it has one: then nothing is leased.
  const block = blocked ? blockedUntil : short ? blockStart(policy, decide(policy, view, sync.need, now).decision, now) : undefined;
  const units = block === undefined ? granted : 0;
  const toldAs = (until?: number) => soonerUnderOthers(asFiled(asked, askedPolicy, policy, now, until), stricter(policy, askedPolicy), now, sync.horizonMs);
  const standing = block === undefined ? toldAs() : blockedDecision(policy, state, block, now);
  const roomy = sync.roomyHorizonMs !== undefined && units > 0 && standing.allowed && isRoomy(standing.remaining, units, active);
  // The lease lasts until the booked call has had half an interval to be answered. An isolate makes
  // that call with its first request after the booked time: a quiet one's lease lasts until that
  // request has almost surely come (seven of its mean gaps, up to ten intervals from now), or it would end
  // unused and the request would wait on a call. Not for a rule with a block: an isolate that never
  // saw the denial must hear of the block within an interval, not admit its next request first.
  const quietCap = Math.max(QUIET_PAST_BOOKED_INTERVALS * sync.horizonMs, now + QUIET_UNTIL_INTERVALS * sync.horizonMs - booking.nextSyncAt);
  const quiet = saturated || rate <= 0 || policy.blockMs !== undefined ? 0 : Math.min(QUIET_GAPS / rate, quietCap);
  const lasts = Math.max(now + (roomy ? sync.roomyHorizonMs! : 0), booking.nextSyncAt + Math.max(answerMs, quiet));
  const expiresAt = short && held === 0 ? Math.min(lasts, now + sync.horizonMs + answerMs) : lasts;
  const topsUp = sync.held !== undefined;
  if (topsUp && !sync.release) pins = pins.map((p) => (p.until < expiresAt ? { ...p, until: expiresAt } : p));
  if (units > 0) pins = [...pins, { lease: sync.seq, units, until: expiresAt }];
  const told = block === undefined && pins.length > 0 ? toldAs(Math.max(...pins.map((p) => p.until))) : standing;
  const exhausted = !sync.release && units < wanted;
  const lease: Lease = { seq: sync.seq, units, expiresAt, standing: told, peers: active, algorithm: policy.algorithm, nextSyncAt: booking.nextSyncAt, saturated: saturated || exhausted, ...(revoke ? { revoke } : {}), ...(topsUp ? { topsUp } : {}) };
  const next = new Map(settled.peers);
  next.set(sync.isolate, { rate, basis, seenAt: now, lease, pins, asked: askedPolicy, under: policy });
  return { state, peers: next, lease, blockedUntil: block ?? blockedUntil, cursor: booking.cursor };
}

export function settlePins(
  policy: Policy,
  stored: LimiterState | undefined,
  peers: ReadonlyMap<string, Peer>,
  now: number,
  every = false,
): { state: LimiterState | undefined; peers: Map<string, Peer> } {
  let state = stored;
  const next = new Map<string, Peer>();
  for (const [id, peer] of peers) {
    const late = peer.pins.filter((p) => every || p.until + REPORT_GRACE_MS <= now);
    for (const pin of late) if (pin.units > 0) state = adjust(policy, state, pin.units, pinSpentAt(policy, pin.until, now), now);
    next.set(id, late.length ? { ...peer, pins: peer.pins.filter((p) => !late.includes(p)) } : peer);
  }
  return { state, peers: next };
}

export function standingWithPins(policy: Policy, state: LimiterState | undefined, peers: ReadonlyMap<string, Peer>, now: number): Decision {
  const pinned = [...peers.values()].reduce((sum, p) => sum + pinnedUnits(p.pins), 0);
  return peek(policy, withPinned(policy, state, pinned, now), now);
}

function withPinned(policy: Policy, state: LimiterState | undefined, pinned: number, now: number): LimiterState | undefined {
  return pinned > 0 ? adjust(policy, state, pinned, now, now) : state;
}
