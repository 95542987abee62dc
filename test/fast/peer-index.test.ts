import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { carryOver, peek, type LimiterState, type Policy } from "../../src/algorithms";
import { grantLease, standingWithPins, type Lease, type SyncRequest } from "../../src/fast/lease";
import { isLive, lastPinEnds, livePeers, type Peer } from "../../src/fast/peer";
import { addExact, emptySum, roundSum } from "../../src/fast/exact-sum";
import { demand, indexPeers, leasePolicy, putPeer, removePeer, settlePins, type PeerIndex } from "../../src/fast/peer-index";
import * as walk from "./walk-reference";

const T0 = 1_700_000_040_000;
const wide: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
/** Worker versions sharing the key: a raised limit, a lowered one, one as strict as `wide` but another policy (a tie), another algorithm. */
const versions: { policy: Policy; syncMs: number }[] = [
  { policy: { ...wide, limit: 200, burst: 200 }, syncMs: 1_000 },
  { policy: wide, syncMs: 1_000 },
  { policy: { ...wide, limit: 10, burst: 10 }, syncMs: 2_000 },
  { policy: { ...wide, buckets: 4 }, syncMs: 1_000 },
  { policy: { algorithm: "token-bucket", limit: 40, periodMs: 60_000, burst: 40, buckets: 1 }, syncMs: 3_000 },
  { policy: { ...wide, algorithm: "sliding-log", limit: 20, burst: 20 }, syncMs: 2_000 },
];

/** The object's sync, alarm and strict settlement over a peers map walked on every call, as before the index. */
class Walked {
  stored: { policy: Policy; state: LimiterState } | undefined;
  peers = new Map<string, Peer>();
  blockedUntil = 0;
  cursor = Number.NEGATIVE_INFINITY;

  sync(asked: Policy, request: SyncRequest, now: number): { under: Policy; lease: Lease } {
    const under = walk.leasePolicy(asked, request.isolate, this.peers, now);
    const stored = this.stored && carryOver(this.stored.policy, this.stored.state, under, now);
    const granted = walk.grantLease(under, stored, this.peers, request, now, this.blockedUntil, this.cursor, asked);
    if (granted.lease === this.peers.get(request.isolate)?.lease) return { under, lease: granted.lease };
    this.cursor = granted.cursor;
    this.peers = granted.peers;
    this.blockedUntil = granted.blockedUntil;
    if (granted.state && granted.state !== stored) this.stored = { policy: under, state: granted.state };
    return { under, lease: granted.lease };
  }

  alarm(now: number): void {
    if (this.stored) {
      const settled = walk.settlePins(this.stored.policy, this.stored.state, this.peers, now);
      if (settled.state && settled.state !== this.stored.state) {
        this.stored = { policy: this.stored.policy, state: settled.state };
        this.peers = settled.peers;
      }
    }
    if (alarmResets(this.stored, this.peers, this.blockedUntil, now)) return this.reset();
    this.peers = livePeers(this.peers, now);
  }

  strict(policy: Policy, now: number): void {
    if (![...this.peers.values()].some((p) => p.pins.length > 0)) return;
    const settled = walk.settlePins(policy, this.stored && carryOver(this.stored.policy, this.stored.state, policy, now), this.peers, now, true);
    if (settled.state) this.stored = { policy, state: settled.state };
    this.peers = settled.peers;
  }

  private reset(): void {
    this.stored = undefined;
    this.peers = new Map();
    this.blockedUntil = 0;
  }
}

/** The same, as src/durable-object/rate-limiter.ts now runs it, over the index. */
class Indexed {
  stored: { policy: Policy; state: LimiterState } | undefined;
  peers: PeerIndex = indexPeers();
  blockedUntil = 0;
  cursor = Number.NEGATIVE_INFINITY;

  sync(asked: Policy, request: SyncRequest, now: number): { under: Policy; lease: Lease } {
    const under = leasePolicy(asked, request.isolate, this.peers, now);
    const stored = this.stored && carryOver(this.stored.policy, this.stored.state, under, now);
    const granted = grantLease(under, stored, this.peers, request, now, this.blockedUntil, this.cursor, asked);
    if (granted.changed.length === 0) return { under, lease: granted.lease };
    this.cursor = granted.cursor;
    this.blockedUntil = granted.blockedUntil;
    if (granted.state && granted.state !== stored) this.stored = { policy: under, state: granted.state };
    return { under, lease: granted.lease };
  }

  alarm(now: number): void {
    if (this.stored) {
      const settled = settlePins(this.stored.policy, this.stored.state, this.peers, now);
      if (settled.state && settled.state !== this.stored.state) this.stored = { policy: this.stored.policy, state: settled.state };
      else for (const [id, peer] of settled.before) putPeer(this.peers, id, peer, now);
    }
    if (alarmResets(this.stored, this.peers.peers, this.blockedUntil, now)) return this.reset();
    for (const [id, peer] of this.peers.peers) if (!isLive(peer, now)) removePeer(this.peers, id);
  }

  strict(policy: Policy, now: number): void {
    if (this.peers.holders === 0) return;
    const settled = settlePins(policy, this.stored && carryOver(this.stored.policy, this.stored.state, policy, now), this.peers, now, true);
    if (settled.state) this.stored = { policy, state: settled.state };
  }

  private reset(): void {
    this.stored = undefined;
    this.peers = indexPeers();
    this.blockedUntil = 0;
  }
}

/** What grantLease's walk summed for a caller at `rate`: the other active peers and their demand, exactly. */
function walkedDemand(peers: ReadonlyMap<string, Peer>, isolate: string, rate: number, horizonMs: number, now: number): { active: number; totalRate: number } {
  let active = 1;
  let sum = addExact(emptySum(), rate, 1);
  for (const [id, p] of peers) {
    if (id === isolate || !(p.seenAt >= now - 2 * horizonMs || p.lease.nextSyncAt >= now - horizonMs)) continue;
    active++;
    sum = addExact(sum, p.rate, 1);
  }
  return { active, totalRate: roundSum(sum) };
}

/** rate-limiter.ts `alarm`'s test for forgetting the key. */
function alarmResets(stored: { policy: Policy; state: LimiterState } | undefined, peers: ReadonlyMap<string, Peer>, blockedUntil: number, now: number): boolean {
  const recovered = stored ? peek(stored.policy, stored.state, now).resetAt : now;
  const lastSync = Math.max(0, ...[...peers.values()].map((p) => p.seenAt));
  return Math.max(recovered, lastSync + 60_000, lastPinEnds(peers) ?? 0, blockedUntil) <= now;
}

const step = fc.record({
  // mostly forward, at times far (past a pin's grace, a peer's TTL), now and then a little back or by a fraction of a ms
  dt: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 800 }) },
    { weight: 2, arbitrary: fc.integer({ min: 1_000, max: 25_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 55_000, max: 90_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: -3_000, max: -1 }) },
    { weight: 1, arbitrary: fc.double({ min: 0, max: 3, noNaN: true }) },
  ),
  kind: fc.constantFrom("sync", "sync", "sync", "sync", "retry", "alarm", "strict"),
  isolate: fc.integer({ min: 0, max: 7 }),
  demand: fc.integer({ min: 0, max: 60 }),
  elapsedMs: fc.integer({ min: 0, max: 6_000 }),
  need: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 30 })),
  roomy: fc.boolean(),
  release: fc.boolean(),
  // what an isolate of this version says its leases will still hold; one of an earlier version says nothing
  held: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  spentShare: fc.double({ min: 0, max: 1, noNaN: true }),
  unspentShare: fc.double({ min: 0, max: 1, noNaN: true }),
});

describe("the peer index", () => {
  it("gives every sync, alarm and strict settlement the answers and state a walk of every peer gives", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: versions.length - 1 }), { minLength: 8, maxLength: 8, size: "max" }), fc.array(step, { minLength: 20, maxLength: 150, size: "max" }), (versionOf, steps) => {
        const walked = new Walked();
        const indexed = new Indexed();
        const seqs = versionOf.map(() => 0);
        const last: (SyncRequest | undefined)[] = versionOf.map(() => undefined);
        let now = T0;
        for (const s of steps) {
          now += s.dt;
          const { policy, syncMs } = versions[versionOf[s.isolate]!]!;
          if (s.kind === "alarm") {
            walked.alarm(now);
            indexed.alarm(now);
          } else if (s.kind === "strict") {
            walked.strict(policy, now);
            indexed.strict(policy, now);
          } else {
            const isolate = `iso-${s.isolate}`;
            let request = s.kind === "retry" ? last[s.isolate] : undefined;
            if (!request) {
              // It reports on the leases the object holds pinned for it: part spent, part given back.
              const pins = walked.peers.get(isolate)?.pins ?? [];
              const reports = pins.slice(0, 2).map((pin) => {
                const spent = Math.floor(pin.units * s.spentShare);
                return { lease: pin.lease, spent: spent > 0 ? [{ at: now - 100, units: spent }] : [], unspent: Math.floor((pin.units - spent) * s.unspentShare) };
              });
              request = { isolate, seq: ++seqs[s.isolate]!, reports, demand: s.demand, elapsedMs: s.elapsedMs, need: s.need, horizonMs: syncMs, ...(s.roomy ? { roomyHorizonMs: 10 * syncMs } : {}), ...(s.release ? { release: true } : {}), ...(s.held === undefined ? {} : { held: s.held }) };
              last[s.isolate] = request;
            }
            expect(indexed.sync(policy, request, now)).toEqual(walked.sync(policy, request, now));
          }
          expect([...indexed.peers.peers]).toEqual([...walked.peers]);
          expect(indexed.stored).toEqual(walked.stored);
          expect([indexed.blockedUntil, indexed.cursor]).toEqual([walked.blockedUntil, walked.cursor]);
          // The figures themselves, for every interval the versions sync at: a last-bit difference in the demand may not show in a lease.
          for (const { syncMs } of versions) expect(demand(indexed.peers, "iso-0", 0.01, syncMs, now)).toEqual(walkedDemand(walked.peers, "iso-0", 0.01, syncMs, now));
          if (walked.stored && indexed.stored) {
            const standing = standingWithPins(indexed.stored.policy, indexed.stored.state, indexed.peers, now);
            expect(standing).toEqual(walk.standingWithPins(walked.stored.policy, walked.stored.state, walked.peers, now));
          }
        }
      }),
      { numRuns: 250 },
    );
  }, 60_000);
});
