import { describe, expect, it } from "vitest";
import type { Lease, SyncRequest } from "../../src/fast/lease";
import {
  admittedUnleased,
  applyLease,
  beyondCapacity,
  blockedAnyway,
  chargeLocally,
  decideLocally,
  deniedLocally,
  freshKey,
  knownShare,
  localPeek,
  nextSync,
  refundLocally,
  surrender,
  syncFailed,
  unadmitUnleased,
  unchargeLocally,
  type Sender,
} from "../../src/fast/local";
import { COLD_REFUSAL_MS } from "../../src/limiter/local-share";
import { leaseLeft, MOST_ENTRIES } from "../../src/fast/lots";
import { slotOf } from "../../src/algorithms";
import { callOnTime, ON_TIME_CALL_MAX_MS, ON_TIME_CALL_WITHIN_MS, ON_TIME_CALLS_PER_CHAIN, onTimeCallAt, releasable, syncDue } from "../../src/fast/sync-timing";
import { AUTO_DIRECT_PEERS, AUTO_RELAY_PEERS } from "../../src/fast/relay";
import type { Rule } from "../../src/config/types";
import { rule } from "../helpers/rules";

const T0 = 1_700_000_000_000;
/** Where spends at T0 are reported: the start of T0's bucket (the rule's one 60 s bucket). */
const T0_BUCKET = T0 - (T0 % 60_000);
const fast = rule({ name: "f", mode: "fast", limit: 100, syncMs: 1_000 });
/** The object's view of a key far from its limit: 90,000 of 100,000 left, against 100 leased. */
const ROOMY = { allowed: true, limit: 100_000, remaining: 90_000, resetAt: T0 + 60_000, moreAt: T0 + 1, retryAfter: 0 };
/** The object's view of a key near its limit: 10 left, against 5 leased. */
const NEAR = { allowed: true, limit: 100, remaining: 10, resetAt: T0 + 60_000, moreAt: T0 + 1, retryAfter: 0 };
/** One sender for the whole file: its sequence only rises, as an isolate's does. */
const from = isolate();
const lease = (seq: number, units: number, overrides: Partial<Lease> = {}): Lease => ({
  seq,
  units,
  expiresAt: T0 + 2_000,
  standing: { allowed: true, limit: 100, remaining: 50, resetAt: T0 + 60_000, moreAt: T0 + 1_200, retryAfter: 0 },
  peers: 1,
  nextSyncAt: T0 + 1_000,
  saturated: false,
  ...overrides,
});

/** A sender whose sequence starts at 1, as a new isolate's does. */
function isolate(): Sender {
  let seq = 0;
  return { isolate: "iso", nextSeq: () => ++seq };
}

/** A key that has been through one sync and holds `units` leased units. */
function leased(units: number, overrides: Partial<Lease> = {}) {
  const key = freshKey(T0);
  const { seq } = nextSync(key, fast, isolate(), 1, T0);
  applyLease(key, fast, lease(seq, units, overrides), T0);
  return key;
}

describe("a fast key in one isolate", () => {
  it("has nothing to decide from before its first sync", () => {
    expect(decideLocally(freshKey(T0), fast, 1, T0)).toBeUndefined();
  });

  it("admits from its lease without a sync", () => {
    const key = leased(3);
    expect(decideLocally(key, fast, 2, T0 + 1)).toMatchObject({ allowed: true, reason: "local" });
    expect(leaseLeft(key)).toBe(1);
  });

  it("needs a sync once the lease cannot cover the cost", () => {
    const key = leased(1);
    expect(decideLocally(key, fast, 2, T0 + 1)).toBeUndefined();
  });

  it("denies from the object's denial until it expires, with no sync", () => {
    const denied = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 1_700, retryAfter: 1_700 };
    const key = leased(0, { standing: denied });
    expect(decideLocally(key, fast, 1, T0 + 1_699)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 1 });
    expect(decideLocally(key, fast, 1, T0 + 1_700)).toBeUndefined();
  });

  it("tells a request costlier than its denial was told for to come back when a window is back to its full quota, with no call", () => {
    const denied = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 1_700, retryAfter: 1_700 };
    const key = leased(0, { standing: denied });
    expect(decideLocally(key, fast, 4, T0 + 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 60_000 - 10 });
    expect(decideLocally(key, fast, 1, T0 + 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 1_700 - 10 });
  });

  it("tells a request costlier than its denial was told for one refill interval more per unit at a token bucket", () => {
    const bucket = rule({ name: "f-tb", mode: "fast", algorithm: "token-bucket", limit: 10, periodMs: 10_000, syncMs: 1_000 });
    const key = freshKey(T0);
    const { seq } = nextSync(key, bucket, isolate(), 1, T0);
    const denied = { allowed: false, limit: 10, remaining: 0, resetAt: T0 + 10_000, moreAt: T0 + 1_000, retryAfter: 1_000 };
    applyLease(key, bucket, lease(seq, 0, { standing: denied }), T0);
    expect(decideLocally(key, bucket, 4, T0 + 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 4_000 - 10 });
  });

  it("tells a costlier request at a saturated token bucket when its cost has refilled, not a refill interval a unit past its booked call", () => {
    const bucket = rule({ name: "f-tb", mode: "fast", algorithm: "token-bucket", limit: 10, periodMs: 10_000, syncMs: 1_000 });
    const key = freshKey(T0);
    const { seq } = nextSync(key, bucket, isolate(), 1, T0);
    // Two tokens free and the next in 500 ms, but this isolate's turn is its booked call, 3 s on.
    const standing = { allowed: true, limit: 10, remaining: 2, resetAt: T0 + 8_000, moreAt: T0 + 500, retryAfter: 0 };
    applyLease(key, bucket, lease(seq, 0, { standing, saturated: true, nextSyncAt: T0 + 3_000, expiresAt: T0 + 3_500 }), T0);
    const oneUnit = decideLocally(key, bucket, 1, T0 + 10)!;
    expect(oneUnit.retryAfter).toBeGreaterThanOrEqual(3_000 - 10);
    expect(decideLocally(key, bucket, 4, T0 + 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: oneUnit.retryAfter });
    expect(decideLocally(key, bucket, 6, T0 + 10)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 3_500 - 10 });
  });

  it("tells a request cheaper than a costly one denied, but of more than one unit, no later than that one passes", () => {
    const denied = { allowed: false, limit: 100, remaining: 2, resetAt: T0 + 60_000, moreAt: T0 + 1_700, retryAfter: 5_000 };
    const key = freshKey(T0);
    const { seq } = nextSync(key, fast, isolate(), 5, T0);
    applyLease(key, fast, lease(seq, 0, { standing: denied }), T0);
    expect(decideLocally(key, fast, 5, T0 + 10)).toMatchObject({ allowed: false, retryAfter: 5_000 - 10 });
    expect(decideLocally(key, fast, 3, T0 + 10)).toMatchObject({ allowed: false, retryAfter: 5_000 - 10 });
    expect(decideLocally(key, fast, 6, T0 + 10)).toMatchObject({ allowed: false, retryAfter: 60_000 - 10 });
  });

  it("holds a denial for at least one sync interval", () => {
    const denied = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 20, retryAfter: 20 };
    const key = leased(0, { standing: denied });
    expect(decideLocally(key, fast, 1, T0 + 999)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 1 });
    expect(decideLocally(key, fast, 1, T0 + 1_000)).toBeUndefined();
  });

  it("reports what an expired lease spent, in the bucket it spent it in, and gives back the rest", () => {
    const key = leased(5);
    decideLocally(key, fast, 2, T0 + 1);
    const next = nextSync(key, fast, from, 0, T0 + 2_000);
    expect(next.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 2 }], unspent: 3 }]);
    expect(leaseLeft(key)).toBe(0);
  });

  it("reports what a live lease spent since the last sync, and keeps the rest", () => {
    const key = leased(5);
    decideLocally(key, fast, 1, T0 + 1);
    decideLocally(key, fast, 1, T0 + 2);
    expect(nextSync(key, fast, from, 0, T0 + 500).reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 2 }], unspent: 0 }]);
    expect(leaseLeft(key)).toBe(3);
  });

  it("reports the demand it saw, admitted or not, since the last sync", () => {
    const key = leased(1);
    decideLocally(key, fast, 1, T0 + 100);
    decideLocally(key, fast, 1, T0 + 200);
    expect(nextSync(key, fast, from, 0, T0 + 500)).toMatchObject({ demand: 2, elapsedMs: 500 });
  });

  it("syncs in the background once per interval", () => {
    const key = leased(100);
    decideLocally(key, fast, 1, T0 + 10);
    expect(syncDue(key, fast, T0 + 999)).toBe(false);
    expect(syncDue(key, fast, T0 + 1_000)).toBe(true);
  });

  it("keeps the lease of a key idle since its last sync while the lease runs, rather than giving it back", () => {
    const key = leased(5, { expiresAt: T0 + 8_000, standing: NEAR });
    expect(syncDue(key, fast, T0 + 2_000)).toBe(true);
    expect(releasable(key, fast, T0 + 2_000)).toBe(false);
  });

  it("gives back the lease of a key idle since its last sync once the lease has ended", () => {
    const key = leased(5, { expiresAt: T0 + 8_000, standing: NEAR });
    expect(releasable(key, fast, T0 + 8_000)).toBe(true);
  });

  it("keeps the lease of a key asked of since its last sync", () => {
    const key = leased(5, { expiresAt: T0 + 8_000, standing: NEAR });
    decideLocally(key, fast, 1, T0 + 9_000);
    expect(releasable(key, fast, T0 + 9_500)).toBe(false);
  });

  it("skips the periodic sync while the key is far from its limit, the lease is healthy and it admitted nothing since its last call", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    expect(syncDue(key, fast, T0 + 1_500)).toBe(false);
  });

  it("syncs at its booked call once it has admitted since its last one, however far the key is from its limit", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    decideLocally(key, fast, 1, T0 + 10);
    expect(syncDue(key, fast, T0 + 999)).toBe(false);
    expect(syncDue(key, fast, T0 + 1_000)).toBe(true);
  });

  it("renews a far-from-limit key's healthy lease in its last interval, before it ends", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    expect(syncDue(key, fast, T0 + 8_999)).toBe(false);
    expect(syncDue(key, fast, T0 + 9_000)).toBe(true);
  });

  it("asks for its next call one interval on, even while the key is far from its limit", () => {
    const roomy = leased(100, { standing: ROOMY });
    expect(nextSync(roomy, fast, from, 0, T0 + 10).horizonMs).toBe(fast.syncMs);
  });

  it("gives up the leases before a long one, so that calling every interval does not pile them up", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    decideLocally(key, fast, 1, T0 + 10);
    const { seq } = nextSync(key, fast, from, 0, T0 + 1_000);
    applyLease(key, fast, lease(seq, 50, { standing: ROOMY, nextSyncAt: T0 + 2_000, expiresAt: T0 + 11_000 }), T0 + 1_000);
    expect(leaseLeft(key)).toBe(50);
    expect(key.reports).toEqual([{ lease: 1, spent: [], unspent: 99 }]);
  });

  it("keeps its earlier leases when the object tops them up, until the new lease ends", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    decideLocally(key, fast, 1, T0 + 10);
    const { seq } = nextSync(key, fast, from, 0, T0 + 1_000);
    applyLease(key, fast, lease(seq, 50, { standing: ROOMY, nextSyncAt: T0 + 2_000, expiresAt: T0 + 11_000, topsUp: true }), T0 + 1_000);
    expect(key.reports).toEqual([]);
    decideLocally(key, fast, 1, T0 + 10_500);
    expect(leaseLeft(key)).toBe(148);
  });

  it("does not renew a lease that ended before the top-up came, which its object may have counted as spent", () => {
    const key = leased(10, { expiresAt: T0 + 2_000 });
    const { seq } = nextSync(key, fast, from, 0, T0 + 1_000);
    applyLease(key, fast, lease(seq, 5, { nextSyncAt: T0 + 3_000, expiresAt: T0 + 5_000, topsUp: true }), T0 + 2_500);
    decideLocally(key, fast, 1, T0 + 2_600);
    expect(leaseLeft(key)).toBe(4);
    expect(key.reports).toEqual([{ lease: 1, spent: [], unspent: 10 }]);
  });

  it("tells the object what its leases will still hold when the answer comes, unrounded: what they hold less its demand over a round trip", () => {
    const key = freshKey(T0);
    const first = nextSync(key, fast, isolate(), 1, T0);
    applyLease(key, fast, lease(first.seq, 10), T0 + 100);
    for (let i = 0; i < 4; i++) decideLocally(key, fast, 1, T0 + 500);
    // 4 units over the 1,000 ms since the last sync was sent, over the last round trip of 100 ms: 0.4 units.
    expect(nextSync(key, fast, from, 0, T0 + 1_000).held).toBeCloseTo(5.6, 9);
  });

  it("keeps a lease that ends soon beside the next one", () => {
    const key = leased(10);
    const { seq } = nextSync(key, fast, from, 0, T0 + 1_000);
    applyLease(key, fast, lease(seq, 5, { nextSyncAt: T0 + 2_000, expiresAt: T0 + 2_500 }), T0 + 1_000);
    expect(leaseLeft(key)).toBe(15);
  });

  it("gives up every lease at once when the object says they were granted under a higher limit than it leases under now", () => {
    const key = leased(100, { standing: ROOMY, expiresAt: T0 + 10_000 });
    decideLocally(key, fast, 3, T0 + 10);
    const { seq } = nextSync(key, fast, from, 0, T0 + 1_000);
    decideLocally(key, fast, 2, T0 + 1_010);
    const denied = { allowed: false, limit: 10, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 30_000, retryAfter: 29_000 };
    applyLease(key, fast, lease(seq, 0, { standing: denied, revoke: true }), T0 + 1_020);
    expect(leaseLeft(key)).toBe(0);
    expect(key.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 2 }], unspent: 95 }]);
    expect(decideLocally(key, fast, 1, T0 + 1_030)).toMatchObject({ allowed: false, reason: "cache" });
  });

  it("offers to take a longer lease for a sliding window, so the object can grant one to a new key far from its limit", () => {
    expect(nextSync(freshKey(T0), fast, from, 1, T0).roomyHorizonMs).toBeGreaterThan(fast.syncMs);
    const bucket = rule({ name: "b", mode: "fast", algorithm: "token-bucket", limit: 100, syncMs: 1_000 });
    expect(nextSync(freshKey(T0), bucket, from, 1, T0).roomyHorizonMs).toBeUndefined();
  });

  it("syncs early when less than half the lease is left, at most four times an interval", () => {
    const key = leased(10);
    for (let i = 0; i < 6; i++) decideLocally(key, fast, 1, T0 + 10);
    expect(syncDue(key, fast, T0 + 249)).toBe(false);
    expect(syncDue(key, fast, T0 + 250)).toBe(true);
  });

  it("retries an unanswered sync as it was, so the object applies it once", () => {
    const key = leased(4);
    decideLocally(key, fast, 1, T0 + 10);
    const first = nextSync(key, fast, from, 0, T0 + 1_000);
    syncFailed(key, fast, T0 + 1_001);
    decideLocally(key, fast, 1, T0 + 1_002);
    const again = nextSync(key, fast, from, 0, T0 + 3_000);
    expect(again).toBe(first);
    expect(again.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 1 }], unspent: 0 }]);
  });

  it("gives back a refunded unit as a negative spend of the live lease", () => {
    const key = leased(4);
    decideLocally(key, fast, 2, T0 + 10);
    refundLocally(key, fast, 1, T0 + 10, T0 + 11);
    expect(leaseLeft(key)).toBe(3);
    expect(nextSync(key, fast, from, 0, T0 + 500).reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 1 }], unspent: 0 }]);
  });

  it("gives back a unit whose lease was spent out and reported in the next sync, and asks rather than deny meanwhile", () => {
    const key = leased(2);
    decideLocally(key, fast, 2, T0 + 10);
    const reported = nextSync(key, fast, from, 1, T0 + 20);
    expect(reported.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 2 }], unspent: 0 }]);
    refundLocally(key, fast, 1, T0 + 10, T0 + 30);
    applyLease(key, fast, lease(reported.seq, 0, { saturated: true, standing: { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 50_000, retryAfter: 50_000, reason: "limit" } }), T0 + 40);
    expect(decideLocally(key, fast, 1, T0 + 50)).toBeUndefined();
    expect(syncDue(key, fast, T0 + 50)).toBe(true);
    expect(nextSync(key, fast, from, 1, T0 + 50).refunds).toEqual([{ at: T0_BUCKET, units: 1 }]);
  });

  it("gives a unit back in the bucket it was spent in, though the refund comes in the next", () => {
    const key = leased(2);
    decideLocally(key, fast, 2, T0_BUCKET + 59_990);
    nextSync(key, fast, from, 0, T0_BUCKET + 59_995);
    refundLocally(key, fast, 1, T0_BUCKET + 59_990, T0_BUCKET + 60_010);
    expect(key.refunds).toEqual([{ at: T0_BUCKET, units: 1 }]);
  });

  it("charges from the lease as a request spends, and owes the object what the lease cannot pay", () => {
    const key = leased(5);
    decideLocally(key, fast, 1, T0 + 10);
    chargeLocally(key, fast, 30, T0 + 20);
    expect(leaseLeft(key)).toBe(0);
    const sent = nextSync(key, fast, from, 0, T0 + 500);
    expect(sent.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 5 }], unspent: 0 }]);
    expect(sent.refunds).toEqual([{ at: T0_BUCKET, units: -26 }]);
    // A charge is not demand: the next lease is sized for the requests.
    expect(sent.demand).toBe(1);
  });

  it("leaves the units requests waiting on a sync were granted to them, owing the charge instead", () => {
    const key = leased(5);
    chargeLocally(key, fast, 4, T0 + 20, 3);
    expect(leaseLeft(key)).toBe(3);
    expect(nextSync(key, fast, from, 0, T0 + 500).refunds).toEqual([{ at: T0_BUCKET, units: -2 }]);
  });

  it("gives back a charge it still owes against the debt, never into the lease", () => {
    const key = leased(5);
    chargeLocally(key, fast, 4, T0 + 20, 5);
    unchargeLocally(key, fast, 4, T0 + 20, T0 + 30);
    expect(leaseLeft(key)).toBe(5);
    expect(nextSync(key, fast, from, 0, T0 + 500).refunds).toEqual([{ at: T0_BUCKET, units: 0 }]);
  });

  it("sends what it owes with the booked call, not a call of its own per charge", () => {
    const key = leased(5);
    chargeLocally(key, fast, 8, T0 + 20);
    expect(syncDue(key, fast, T0 + 20)).toBe(false);
    expect(syncDue(key, fast, T0 + 1_000)).toBe(true);
  });

  it("keeps the object's denial when what it owes is a charge: only units given back free anything", () => {
    const key = leased(1);
    decideLocally(key, fast, 1, T0 + 10);
    const sent = nextSync(key, fast, from, 1, T0 + 20);
    chargeLocally(key, fast, 5, T0 + 30);
    const denied = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 50_000, retryAfter: 50_000, reason: "limit" as const };
    applyLease(key, fast, lease(sent.seq, 0, { standing: denied }), T0 + 40);
    expect(deniedLocally(key, fast, 1, T0 + 50)).toBe(true);
  });

  it("backs off after a failed sync", () => {
    const key = leased(5);
    nextSync(key, fast, from, 0, T0 + 1_000);
    syncFailed(key, fast, T0 + 1_000);
    expect(syncDue(key, fast, T0 + 1_999)).toBe(false);
    expect(syncDue(key, fast, T0 + 2_000)).toBe(true);
  });

  it("numbers every sync above the last, even for a key it forgot and saw again", () => {
    const sender = isolate();
    const first = nextSync(freshKey(T0), fast, sender, 1, T0);
    const again = nextSync(freshKey(T0 + 1), fast, sender, 1, T0 + 1);
    expect(again.seq).toBeGreaterThan(first.seq);
  });

  it("ignores an answer to a sync it did not send", () => {
    const key = leased(2);
    applyLease(key, fast, lease(7, 50), T0 + 5);
    expect(leaseLeft(key)).toBe(2);
  });

  it("surrenders its whole lease when it leaves the table", () => {
    const key = leased(6);
    decideLocally(key, fast, 1, T0 + 10);
    surrender(key);
    expect(leaseLeft(key)).toBe(0);
    expect(key.reports).toEqual([{ lease: 1, spent: [{ at: T0_BUCKET, units: 1 }], unspent: 5 }]);
  });

  it("tells the object the units of the costliest of several waiting requests, and nothing more for one", () => {
    expect(nextSync(freshKey(T0), fast, from, 30, T0, false, 1).costliest).toBe(1);
    expect(nextSync(freshKey(T0), fast, from, 5, T0, false, 5)).not.toHaveProperty("costliest");
  });

  it("reports what onError admitted without a lease with the next sync, in the bucket it was admitted in", () => {
    const key = freshKey(T0);
    admittedUnleased(key, fast, 2, T0);
    admittedUnleased(key, fast, 1, T0 + 10);
    expect(syncDue(key, fast, T0 + 10)).toBe(true);
    expect(nextSync(key, fast, from, 0, T0 + 10).unleased).toEqual([{ at: T0_BUCKET, units: 3 }]);
  });

  it("takes what onError admitted for a request another rule denied off the next sync's report", () => {
    const key = freshKey(T0);
    admittedUnleased(key, fast, 2, T0);
    unadmitUnleased(key, fast, 1, T0, T0 + 10);
    expect(nextSync(key, fast, from, 0, T0 + 10)).toMatchObject({ unleased: [{ at: T0_BUCKET, units: 1 }] });
  });

  it("gives back what onError admitted for a request another rule denied with the next sync, once a sync already told the object of it", () => {
    const key = freshKey(T0);
    admittedUnleased(key, fast, 2, T0);
    expect(nextSync(key, fast, from, 0, T0 + 10).unleased).toEqual([{ at: T0_BUCKET, units: 2 }]);
    unadmitUnleased(key, fast, 2, T0, T0 + 20);
    expect(key.unleased).toEqual([]);
    expect(key.refunds).toEqual([{ at: T0_BUCKET, units: 2 }]);
  });

  it("gives back at once as much of a grant as onError admitted after the answered sync left, with those admissions", () => {
    // The sync of before the outage is retried and answered: the object granted 10 knowing nothing of the 4 admitted meanwhile.
    const key = freshKey(T0);
    const { seq } = nextSync(key, fast, isolate(), 1, T0);
    admittedUnleased(key, fast, 4, T0 + 500);
    applyLease(key, fast, lease(seq, 10), T0 + 600);

    expect(leaseLeft(key)).toBe(6);
    const next = nextSync(key, fast, from, 0, T0 + 700);
    expect(next.unleased).toEqual([{ at: T0_BUCKET, units: 4 }]);
    expect(next.reports).toEqual([{ lease: seq, spent: [], unspent: 4 }]);
  });

  it("holds back nothing for what onError admitted longer ago than the object counts", () => {
    const window = rule({ name: "f-10s", mode: "fast", limit: 100, periodMs: 10_000, syncMs: 1_000 });
    const key = freshKey(T0);
    const { seq } = nextSync(key, window, isolate(), 1, T0);
    for (let t = 0; t <= 120_000; t += 10_000) admittedUnleased(key, window, 1, T0 + t);
    applyLease(key, window, lease(seq, 8, { expiresAt: T0 + 130_000 }), T0 + 120_500);
    expect(leaseLeft(key)).toBe(7);
  });

  it("says a denial from the cache leaves fewer units than asked for, in a peek too, whatever the object has free", () => {
    const key = leased(0, { units: 0, saturated: true, standing: { ...NEAR, remaining: 9 }, nextSyncAt: T0 + 15_000 });
    expect(decideLocally(key, fast, 2, T0 + 1)).toMatchObject({ allowed: false, remaining: 1 });
    expect(localPeek(key, fast, T0 + 1)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it("gives a grant back whole when onError admitted at least as much after the answered sync left", () => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, fast, isolate(), 1, T0);
    admittedUnleased(key, fast, 5, T0 + 500);
    applyLease(key, fast, lease(seq, 3), T0 + 600);

    expect(leaseLeft(key)).toBe(0);
    expect(nextSync(key, fast, from, 0, T0 + 700).reports).toEqual([{ lease: seq, spent: [], unspent: 3 }]);
  });

  it("reports an outage of any length in at most MOST_ENTRIES entries, every unit in it, none filed sooner than it went", () => {
    const bucket = rule({ name: "f-tb", mode: "fast", algorithm: "token-bucket", limit: 64, periodMs: 1_000, syncMs: 1_000 });
    const key = freshKey(T0);
    // One unit each 16 ms tick of a 1 s bucket for a minute: 3,750 ticks.
    for (let t = 0; t < 60_000; t += 16) admittedUnleased(key, bucket, 1, T0 + t);
    const { unleased = [] } = nextSync(key, bucket, from, 0, T0 + 60_000);
    expect(unleased).toHaveLength(MOST_ENTRIES);
    expect(unleased.reduce((sum, s) => sum + s.units, 0)).toBe(3_750);
    expect(unleased.at(-1)).toEqual({ at: slotOf(bucket, T0 + 59_984), units: 1 });
    expect(unleased[0]!.at).toBe(slotOf(bucket, T0 + (3_750 - MOST_ENTRIES) * 16));
  });

  it("waits for the call the object booked, not one interval, before its periodic sync", () => {
    const key = leased(100, { nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 10);
    expect(syncDue(key, fast, T0 + 4_999)).toBe(false);
    expect(syncDue(key, fast, T0 + 5_000)).toBe(true);
  });

  it("denies a saturated key from its cache once the lease is spent, until its booked call", () => {
    const key = leased(1, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    expect(decideLocally(key, fast, 1, T0 + 10)).toMatchObject({ allowed: true });
    expect(decideLocally(key, fast, 1, T0 + 20)).toMatchObject({ allowed: false, reason: "cache" });
    expect(decideLocally(key, fast, 1, T0 + 4_999)).toMatchObject({ allowed: false, reason: "cache" });
    expect(syncDue(key, fast, T0 + 20)).toBe(false);
  });

  it("denies a request that finds a saturated key's lease spent at its booked time while that call, made ahead, is on its way", () => {
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 4_990);
    nextSync(key, fast, from, 0, T0 + 4_990);
    expect(decideLocally(key, fast, 1, T0 + 5_000)).toMatchObject({ allowed: false, reason: "cache" });
  });

  it("lets the request that finds a saturated key's booked time come with no call made wait on it, though the isolate was asked for more since its last sync", () => {
    // A client's burst long before, then its retry at the time it was told: held, it was refused, and passed 70 ms later.
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 10);
    decideLocally(key, fast, 1, T0 + 10);
    expect(decideLocally(key, fast, 1, T0 + 5_000)).toBeUndefined();
  });

  describe("tells a request a saturated key's cache denies to come back when its booked call's answer is expected", () => {
    /** A saturated key whose last sync, sent at T0, was answered 80 ms later with nothing, its next call booked at T0 + 5,000. */
    const answeredIn80ms = () => {
      const key = freshKey(T0);
      const { seq } = nextSync(key, fast, from, 1, T0);
      applyLease(key, fast, lease(seq, 0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 }), T0 + 80);
      return key;
    };

    it("two of the key's round trips after the booked time, and 50 ms, for a denial that ends at the booked call", () => {
      expect(decideLocally(answeredIn80ms(), fast, 1, T0 + 100)?.retryAfter).toBe(5_000 + 2 * 80 + 50 - 100);
    });

    it("as much after a call made at the booked time, in the hold while it is on its way, rather than at the hold's end", () => {
      const key = answeredIn80ms();
      decideLocally(key, fast, 1, T0 + 5_000);
      nextSync(key, fast, from, 0, T0 + 5_000);
      expect(decideLocally(key, fast, 1, T0 + 5_000)).toMatchObject({ allowed: false, reason: "cache", retryAfter: 2 * 80 + 50 });
    });

    it("counted from when the call on its way was sent, and no sooner than a round trip from now", () => {
      const key = answeredIn80ms();
      decideLocally(key, fast, 1, T0 + 100);
      decideLocally(key, fast, 1, T0 + 4_900);
      nextSync(key, fast, from, 0, T0 + 4_900);
      expect(decideLocally(key, fast, 1, T0 + 4_950)?.retryAfter).toBe(4_900 + 2 * 80 + 50 - 4_950);
      expect(decideLocally(key, fast, 1, T0 + 5_200)?.retryAfter).toBe(80 + 50);
    });

    it("when a booked call that failed may be sent again, and lets the request then wait on it", () => {
      // A 3 s timeout, so that the hold outlasts the failed call's backoff.
      const patient = rule({ name: "f", mode: "fast", limit: 100, syncMs: 1_000, timeoutMs: 3_000 });
      const key = answeredIn80ms();
      decideLocally(key, patient, 1, T0 + 4_990);
      nextSync(key, patient, from, 0, T0 + 4_990);
      syncFailed(key, patient, T0 + 4_995);
      const held = decideLocally(key, patient, 1, T0 + 5_010)!;
      expect(held).toMatchObject({ allowed: false, reason: "cache" });
      expect(T0 + 5_010 + held.retryAfter).toBe(key.retryAt + 2 * 80 + 50);
      expect(decideLocally(key, patient, 1, T0 + 5_010 + held.retryAfter)).toBeUndefined();
    });

    it("by the denial's source: the object's, ending at the hold's end by chance, is told as it is", () => {
      // The key frees a unit at T0 + 6,000, the booked call's time plus the rule's timeout.
      const denial = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 6_000, retryAfter: 5_920 };
      const key = freshKey(T0);
      const { seq } = nextSync(key, fast, from, 1, T0);
      applyLease(key, fast, lease(seq, 0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000, standing: denial }), T0 + 80);
      expect(decideLocally(key, fast, 1, T0 + 100)?.retryAfter).toBe(6_000 - 100);
    });

    it("no later than the hold's end, the rule's timeout after the booked time", () => {
      const slow = rule({ name: "f", mode: "fast", limit: 100, syncMs: 1_000, timeoutMs: 200 });
      const key = answeredIn80ms();
      expect(decideLocally(key, slow, 1, T0 + 100)?.retryAfter).toBe(5_000 + 200 - 100);
    });
  });

  it("denies a saturated key's requests while its booked call is on its way", () => {
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 10);
    decideLocally(key, fast, 1, T0 + 5_000);
    nextSync(key, fast, from, 0, T0 + 5_000);
    expect(decideLocally(key, fast, 1, T0 + 5_010)).toMatchObject({ allowed: false, reason: "cache" });
  });

  it("reports the hold while a saturated key's booked call is on its way as a cached denial, so no other rule need ask its object", () => {
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    expect(deniedLocally(key, fast, 1, T0 + 5_000)).toBe(false);
    decideLocally(key, fast, 1, T0 + 5_000);
    nextSync(key, fast, from, 0, T0 + 5_000);
    expect(deniedLocally(key, fast, 1, T0 + 5_000)).toBe(true);
  });

  it("makes the booked call of a key with nothing to spare, its lease spent, with a request within the interval and two of its mean gaps before it", () => {
    // Two requests in 4.5 s since the grant: a mean gap of 2.25 s, so the lead is the whole interval.
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 2_000);
    expect(syncDue(key, fast, T0 + 2_000)).toBe(false);
    expect(decideLocally(key, fast, 1, T0 + 4_500)).toMatchObject({ allowed: false, reason: "cache" });
    expect(syncDue(key, fast, T0 + 4_500)).toBe(true);
  });

  it("makes a busy isolate's booked call no sooner than two of its mean gaps before it", () => {
    // Ten requests in 4 s, a mean gap of 400 ms: a lead of 800 ms, short of the 1 s still to go.
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    for (let i = 1; i <= 10; i++) decideLocally(key, fast, 1, T0 + i * 400);
    expect(syncDue(key, fast, T0 + 4_000)).toBe(false);
    // Eleven in 4.3 s: a lead of 782 ms, past the 700 ms to go.
    decideLocally(key, fast, 1, T0 + 4_300);
    expect(syncDue(key, fast, T0 + 4_300)).toBe(true);
  });

  it("lets a quiet isolate's request wait on the call once a saturated key's booked time has come", () => {
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    expect(decideLocally(key, fast, 1, T0 + 5_500)).toBeUndefined();
  });

  it("lets a request ask once a saturated key's denial, which outlasted its booked time, has ended", () => {
    // The booked call comes at T0 + 1,000; the key frees a unit only at T0 + 1,500.
    const denial = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 1_500, retryAfter: 1_500 };
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 1_000, expiresAt: T0 + 2_000, standing: denial });
    expect(decideLocally(key, fast, 1, T0 + 500)).toMatchObject({ allowed: false, reason: "cache" });
    expect(decideLocally(key, fast, 1, T0 + 1_600)).toBeUndefined();
  });

  it("takes the next lease of a saturated key as soon as its booked call is answered", () => {
    const key = leased(0, { saturated: true, nextSyncAt: T0 + 5_000, expiresAt: T0 + 6_000 });
    decideLocally(key, fast, 1, T0 + 5_000);
    const { seq } = nextSync(key, fast, from, 0, T0 + 5_000);
    applyLease(key, fast, lease(seq, 3, { saturated: true, nextSyncAt: T0 + 10_000, expiresAt: T0 + 11_000 }), T0 + 5_050);
    expect(decideLocally(key, fast, 1, T0 + 5_060)).toMatchObject({ allowed: true, reason: "local" });
  });
});

describe("a fast key under a rule with a block", () => {
  const blocking = rule({ name: "b", mode: "fast", limit: 100, syncMs: 1_000, blockMs: 300_000 });
  const denial = { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 30_000, retryAfter: 30_000 };
  const answered = (standing: Lease["standing"]) => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, blocking, isolate(), 0, T0);
    applyLease(key, blocking, lease(seq, 0, { standing }), T0 + 10);
    return key;
  };

  it("has its next request ask after an empty background grant, so the object sees the denial that starts the block", () => {
    expect(decideLocally(answered({ ...denial, reason: "limit" }), blocking, 1, T0 + 20)).toBeUndefined();
  });

  it("denies from its cache once the object says the key is blocked, saying it is blocked", () => {
    const blocked = { ...denial, moreAt: T0 + 300_000, retryAfter: 300_000, reason: "blocked" as const };
    expect(decideLocally(answered(blocked), blocking, 1, T0 + 20)).toMatchObject({ allowed: false, reason: "blocked" });
  });

  it("denies a cost the rule can never admit as blocked while the block holds, until it ends, as the object denies it", () => {
    const blocked = { ...denial, moreAt: T0 + 300_010, retryAfter: 300_000, reason: "blocked" as const };
    expect(beyondCapacity(answered(blocked), blocking, T0 + 20)).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 300_000 - 10 });
  });

  it("denies a cost the rule can never admit as such, for a period, where no block holds", () => {
    expect(beyondCapacity(answered({ ...denial, reason: "limit" }), blocking, T0 + 20)).toMatchObject({ allowed: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });

  /** A block until T0 + 300 s, as the object answers a sync that asked for `cost` (0: a background one): that cost passes at `costAt`. */
  const blockedFor = (key: ReturnType<typeof freshKey>, cost: number, costAt: number, now: number) => {
    const { seq } = nextSync(key, blocking, isolate(), cost, now);
    applyLease(key, blocking, lease(seq, 0, { standing: { ...denial, moreAt: T0 + 300_000, resetAt: costAt, retryAfter: costAt - now, reason: "blocked" } }), now);
    return key;
  };

  it("tells a costlier request under a block when the object said a request of its cost passes, and one unit when the block ends", () => {
    const key = blockedFor(freshKey(T0), 5, T0 + 400_000, T0 + 10);
    expect(decideLocally(key, blocking, 5, T0 + 20)).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 400_000 - 20 });
    expect(decideLocally(key, blocking, 1, T0 + 20)).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 300_000 - 20 });
  });

  it("asks the object when a request costlier than any it was told of passes under a block", () => {
    const key = blockedFor(freshKey(T0), 0, T0 + 300_000, T0 + 10);
    expect(decideLocally(key, blocking, 5, T0 + 20)).toBeUndefined();
    expect(deniedLocally(key, blocking, 5, T0 + 20)).toBe(false);
  });

  it("tells a cheaper request under a block the block's end when a costlier one passes then, else the costlier one's time", () => {
    const atEnd = blockedFor(freshKey(T0), 5, T0 + 300_000, T0 + 10);
    expect(decideLocally(atEnd, blocking, 3, T0 + 20)).toMatchObject({ reason: "blocked", retryAfter: 300_000 - 20 });
    const later = blockedFor(freshKey(T0), 5, T0 + 400_000, T0 + 10);
    expect(decideLocally(later, blocking, 3, T0 + 20)).toMatchObject({ reason: "blocked", retryAfter: 400_000 - 20 });
  });

  it("asks the object under one block about four costs at most, then tells the costliest's time", () => {
    const key = freshKey(T0);
    for (const cost of [2, 3, 4, 5]) blockedFor(key, cost, T0 + 300_000 + cost * 1_000, T0 + 10);
    expect(decideLocally(key, blocking, 9, T0 + 20)).toMatchObject({ reason: "blocked", retryAfter: 305_000 - 20 });
  });

  it("forgets what a block told of costlier requests once the key is no longer blocked", () => {
    const key = blockedFor(freshKey(T0), 5, T0 + 400_000, T0 + 10);
    const { seq } = nextSync(key, blocking, isolate(), 0, T0 + 20);
    applyLease(key, blocking, lease(seq, 0, { standing: { ...denial, reason: "limit" } }), T0 + 20);
    expect(key.costlier).toEqual([]);
  });

  it("denies a request as blocked when the object cannot be asked when its cost passes, told the latest time it knows", () => {
    const key = blockedFor(freshKey(T0), 2, T0 + 350_000, T0 + 10);
    expect(blockedAnyway(key, blocking, 5, T0 + 20)).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 350_000 - 20 });
    expect(blockedAnyway(answered({ ...denial, reason: "limit" }), blocking, 5, T0 + 20)).toBeUndefined();
  });

  it("keeps a fixed window's block past the window's turn, where the window's own count is gone", () => {
    const windowed = rule({ name: "bw", mode: "fast", algorithm: "fixed-window", limit: 3, periodMs: 10_000, syncMs: 1_000, blockMs: 300_000 });
    const key = freshKey(T0);
    const { seq } = nextSync(key, windowed, isolate(), 0, T0);
    applyLease(key, windowed, lease(seq, 0, { standing: { ...denial, limit: 3, moreAt: T0 + 300_000, retryAfter: 300_000, reason: "blocked" } }), T0 + 10);
    expect(decideLocally(key, windowed, 1, T0 + 15_000)).toMatchObject({ allowed: false, reason: "blocked", remaining: 0 });
  });
});

describe("a fast fixed window at its turn", () => {
  const windowed = rule({ name: "fw", mode: "fast", algorithm: "fixed-window", limit: 5, periodMs: 300_000, syncMs: 1_000 });
  /** Spent at T0, 35 s before the window turns: the object's call for it booked a minute on. */
  const turnsAt = T0 + 35_000;
  /** `under`: the isolate's rule; `algorithm`: what the object says it leased under, when it says. */
  const spent = (under: Rule = windowed, algorithm?: Lease["algorithm"]) => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, under, isolate(), 1, T0);
    const standing = { allowed: false, limit: 5, remaining: 0, resetAt: turnsAt, moreAt: turnsAt, retryAfter: 35_000 };
    applyLease(key, under, lease(seq, 0, { standing, nextSyncAt: T0 + 61_000, expiresAt: T0 + 61_000, saturated: true, ...(algorithm ? { algorithm } : {}) }), T0);
    decideLocally(key, under, 1, T0 + 1);
    return key;
  };

  it("denies until the window turns, and says so", () => {
    expect(decideLocally(spent(), windowed, 1, T0 + 2)).toMatchObject({ allowed: false, retryAfter: 35_000 - 2 });
  });

  it("denies nothing once the window has turned, though the key's booked call is later: its next request asks", () => {
    const key = spent();
    expect(decideLocally(key, windowed, 1, turnsAt)).toBeUndefined();
    expect(deniedLocally(key, windowed, 1, turnsAt + 10_000)).toBe(false);
  });

  it("denies a costly request nothing once the window has turned, though its denial came less than a sync interval before", () => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, windowed, isolate(), 3, turnsAt - 500);
    const standing = { allowed: false, limit: 5, remaining: 1, resetAt: turnsAt, moreAt: turnsAt, retryAfter: 500 };
    applyLease(key, windowed, lease(seq, 0, { standing, nextSyncAt: turnsAt + 500, expiresAt: turnsAt + 500 }), turnsAt - 500);
    expect(decideLocally(key, windowed, 3, turnsAt + 10)).toBeUndefined();
  });

  it("ends a sliding-window isolate's denial at the turn of the fixed window another version's rule had the object lease under", () => {
    const sliding = rule({ name: "fw", mode: "fast", limit: 5, periodMs: 300_000, syncMs: 1_000 });
    expect(decideLocally(spent(sliding, "fixed-window"), sliding, 1, turnsAt)).toBeUndefined();
  });

  it("keeps a fixed-window isolate's denial until its booked call when the object leased under another version's sliding window", () => {
    expect(decideLocally(spent(windowed, "sliding-window"), windowed, 1, turnsAt)).toMatchObject({ allowed: false, reason: "cache" });
  });
});

describe("a fast fixed window's units given back or charged around its turn", () => {
  const windowed = rule({ name: "fw2", mode: "fast", algorithm: "fixed-window", limit: 2, periodMs: 60_000, syncMs: 1_000 });
  /** T0 is 20 s into its minute: the window turns 40 s on. */
  const turn = T0 + 40_000;
  const held = (units: number) => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, windowed, isolate(), 1, T0);
    applyLease(key, windowed, lease(seq, units, { expiresAt: turn + 20_000, nextSyncAt: turn + 10_000 }), T0);
    return key;
  };
  const admitted = (key: ReturnType<typeof held>, n: number, now: number) =>
    Array.from({ length: n }, () => decideLocally(key, windowed, 1, now)).filter((d) => d?.allowed).length;

  it("gives a unit of a window that is over back to the object, not into the lease it would be spent from in the next", () => {
    const key = held(2);
    decideLocally(key, windowed, 1, turn - 10);
    refundLocally(key, windowed, 1, turn - 10, turn + 10);
    expect(leaseLeft(key)).toBe(1);
    expect(key.refunds).toEqual([{ at: slotOf(windowed, turn - 10), units: 1 }]);
  });

  it("takes a unit given back into the lease out again at the window's turn, before the object has heard of it", () => {
    const key = held(2);
    decideLocally(key, windowed, 1, turn - 10);
    refundLocally(key, windowed, 1, turn - 10, turn - 5);
    expect(leaseLeft(key)).toBe(2);
    expect(admitted(key, 3, turn + 10)).toBe(1);
  });

  it("withholds from a grant what a charge took past the lease while its sync was on its way", () => {
    const key = held(1);
    decideLocally(key, windowed, 1, T0 + 10);
    const { seq } = nextSync(key, windowed, from, 1, T0 + 20);
    chargeLocally(key, windowed, 5, T0 + 30);
    applyLease(key, windowed, lease(seq, 2, { expiresAt: turn + 20_000 }), T0 + 40);
    expect(leaseLeft(key)).toBe(0);
    const next = nextSync(key, windowed, from, 0, T0 + 50);
    expect(next.reports).toEqual([{ lease: seq, spent: [], unspent: 2 }]);
    expect(next.refunds).toEqual([{ at: slotOf(windowed, T0), units: -5 }]);
  });
});

describe("a fast fixed window by calendar month", () => {
  it("withholds nothing of what onError admitted in a month that is over from a grant in the next, which the object counts for nothing", () => {
    const monthly = rule({ name: "m", mode: "fast", algorithm: "fixed-window", limit: 100, periodMs: 31 * 86_400_000, months: 1, syncMs: 1_000 });
    const lastSecond = Date.UTC(2027, 1, 28, 23, 59, 59);
    const key = freshKey(lastSecond);
    const sent = nextSync(key, monthly, isolate(), 1, lastSecond);
    // The object is slow: onError admits 5 on February 28th after the sync left; its answer comes on March 2nd.
    admittedUnleased(key, monthly, 5, lastSecond + 500);
    const now = Date.UTC(2027, 2, 2);
    const standing = { allowed: true, limit: 100, remaining: 90, resetAt: Date.UTC(2027, 3, 1), moreAt: Date.UTC(2027, 3, 1), retryAfter: 0 };
    applyLease(key, monthly, lease(sent.seq, 10, { standing, expiresAt: now + 2_000, nextSyncAt: now + 1_000 }), now);
    expect(leaseLeft(key)).toBe(10);
  });
});

describe("a saturated sliding-window key", () => {
  it("keeps denying until its booked call though its standing says it is full again sooner: the booked calls share out what it frees", () => {
    const quick = rule({ name: "q", mode: "fast", limit: 1_000, periodMs: 1_000, syncMs: 1_000 });
    const key = freshKey(T0);
    const { seq } = nextSync(key, quick, isolate(), 1, T0);
    const standing = { allowed: false, limit: 1_000, remaining: 0, resetAt: T0 + 1_200, moreAt: T0 + 1, retryAfter: 1 };
    applyLease(key, quick, lease(seq, 0, { standing, nextSyncAt: T0 + 5_000, saturated: true }), T0);
    decideLocally(key, quick, 1, T0 + 1);
    expect(decideLocally(key, quick, 1, T0 + 1_300)).toMatchObject({ allowed: false, reason: "cache" });
  });
});

describe("a fast key's booked call, made on time when no request comes to make it", () => {
  /** A key of `under` whose last sync, sent at T0, was answered at `at` (80 ms later) with `units`, its next call booked at T0 + 1,000. */
  const answered = (units: number, overrides: Partial<Lease> = {}, under = fast, at = T0 + 80) => {
    const key = freshKey(T0);
    const { seq } = nextSync(key, under, isolate(), 1, T0);
    applyLease(key, under, lease(seq, units, overrides), at);
    return key;
  };
  /** The sync that answer was for: `demand` units asked over the interval before it. */
  const sent = (demand: number): SyncRequest => ({ isolate: "iso", seq: 1, reports: [], demand, elapsedMs: 1_000, need: 0, horizonMs: 1_000 });

  it("sets the call's timer one round trip before the booked time, so the answer is back by then", () => {
    // 2 units a second over the 840 ms to the timer, and a standard deviation more, leave 1 of 4.
    expect(onTimeCallAt(answered(4), fast, sent(2), { since: T0, calls: 0 }, T0 + 80)).toBe(T0 + 1_000 - 80);
  });

  it("sets no timer when the lease will still be healthy at the booked time, at the pace the key was asked for", () => {
    expect(onTimeCallAt(answered(10), fast, sent(2), { since: T0, calls: 0 }, T0 + 80)).toBeUndefined();
  });

  it("sets no timer while the object's denial holds past the booked time: the call would find nothing", () => {
    const denied = answered(0, { standing: { allowed: false, limit: 100, remaining: 0, resetAt: T0 + 60_000, moreAt: T0 + 30_000, retryAfter: 30_000 } });
    expect(onTimeCallAt(denied, fast, sent(2), { since: T0, calls: 0 }, T0 + 80)).toBeUndefined();
  });

  it("sets no timer for a call booked further off than it may wait", () => {
    const far = answered(4, { nextSyncAt: T0 + 80 + ON_TIME_CALL_MAX_MS + 100, expiresAt: T0 + 20_000 });
    expect(onTimeCallAt(far, fast, sent(2), { since: T0, calls: 0 }, T0 + 80)).toBeUndefined();
  });

  it("sets no timer after an answer that took more than half the rule's timeout: a busy object would only see its queue grow", () => {
    const key = answered(4, { nextSyncAt: T0 + 2_000, expiresAt: T0 + 3_000 }, fast, T0 + 600);
    expect(onTimeCallAt(key, fast, sent(2), { since: T0, calls: 0 }, T0 + 600)).toBeUndefined();
  });

  it("sets a timer after a slow answer through a relay, whose batches the object paces", () => {
    const relayed = rule({ name: "f", mode: "fast", limit: 100, syncMs: 1_000, aggregate: "continent" });
    const key = answered(4, { nextSyncAt: T0 + 2_000, expiresAt: T0 + 3_000 }, relayed, T0 + 600);
    expect(onTimeCallAt(key, relayed, sent(2), { since: T0, calls: 0 }, T0 + 600)).toBe(T0 + 2_000 - 600);
  });

  it("sets a timer after a slow answer of an auto rule's key once the object reports a crowd, whose relay answered it", () => {
    const key = answered(4, { nextSyncAt: T0 + 2_000, expiresAt: T0 + 3_000, peers: AUTO_RELAY_PEERS }, fast, T0 + 600);
    expect(onTimeCallAt(key, fast, sent(2), { since: T0, calls: 0 }, T0 + 600)).toBe(T0 + 2_000 - 600);
  });

  it("sets no timer once the timers under one request have made as many calls as a chain may", () => {
    expect(onTimeCallAt(answered(4), fast, sent(2), { since: T0, calls: ON_TIME_CALLS_PER_CHAIN }, T0 + 80)).toBeUndefined();
  });

  it("sets no timer past the time the request it runs under may keep it", () => {
    expect(onTimeCallAt(answered(4), fast, sent(2), { since: T0 + 80 - ON_TIME_CALL_WITHIN_MS, calls: 0 }, T0 + 80)).toBeUndefined();
  });

  it("makes the call when the key was asked for since its last sync and its lease is down to one unit", () => {
    const key = answered(2);
    decideLocally(key, fast, 1, T0 + 300);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(true);
  });

  it("makes the call when less than half its grant is left", () => {
    const key = answered(10);
    for (let i = 0; i < 6; i++) decideLocally(key, fast, 1, T0 + 300);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(true);
  });

  it("makes the call when its lease is spent at a key with nothing to spare", () => {
    const key = answered(1, { saturated: true });
    decideLocally(key, fast, 1, T0 + 300);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(true);
  });

  it("leaves the call to the next request while the lease is healthy", () => {
    const key = answered(10);
    for (let i = 0; i < 3; i++) decideLocally(key, fast, 1, T0 + 300);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(false);
  });

  it("makes no call for a key not asked for since its last sync", () => {
    expect(callOnTime(answered(1), T0 + 80, T0 + 920)).toBe(false);
  });

  it("makes no call once a later sync was answered: that answer sets its own timer", () => {
    const key = answered(4);
    for (let i = 0; i < 3; i++) decideLocally(key, fast, 1, T0 + 300);
    const { seq } = nextSync(key, fast, from, 0, T0 + 400);
    applyLease(key, fast, lease(seq, 4, { nextSyncAt: T0 + 1_400 }), T0 + 480);
    decideLocally(key, fast, 1, T0 + 500);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(false);
  });

  it("makes no call while a sync is on its way, or failed and waits for its retry", () => {
    const key = answered(4);
    for (let i = 0; i < 3; i++) decideLocally(key, fast, 1, T0 + 300);
    nextSync(key, fast, from, 0, T0 + 400);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(false);
    syncFailed(key, fast, T0 + 900);
    decideLocally(key, fast, 1, T0 + 910);
    expect(callOnTime(key, T0 + 80, T0 + 920)).toBe(false);
  });
});

describe("what onError local knows of how a fast key is shared", () => {
  it("knows no share while none of the rule's objects has answered, for COLD_REFUSAL_MS", () => {
    expect(knownShare(freshKey(T0), 0, COLD_REFUSAL_MS - 1).peers).toBe(0);
  });

  it("counts the isolate alone once the rule's objects have left it unanswered for COLD_REFUSAL_MS", () => {
    expect(knownShare(freshKey(T0), 0, COLD_REFUSAL_MS).peers).toBe(1);
  });

  it("takes the most isolates any of the rule's objects reported for a key whose own object never answered", () => {
    expect(knownShare(freshKey(T0), 40, 0).peers).toBe(40);
  });

  it("takes the key's own object's count and free units once it has answered", () => {
    const key = freshKey(T0);
    nextSync(key, fast, from, 1, T0);
    applyLease(key, fast, lease(key.outbox!.seq, 10, { peers: 7 }), T0 + 5);
    expect(knownShare(key, 40, 0)).toEqual({ peers: 7, free: 50, heardAt: T0 + 5 });
  });
});

describe("a key's crowd, for aggregate: auto", () => {
  it("is crowded once an answer reports AUTO_RELAY_PEERS isolates at the key's object", () => {
    expect(leased(5, { peers: AUTO_RELAY_PEERS - 1 }).relayed).toBe(false);
    expect(leased(5, { peers: AUTO_RELAY_PEERS }).relayed).toBe(true);
  });

  it("stays crowded until an answer reports AUTO_DIRECT_PEERS isolates or fewer", () => {
    const key = leased(5, { peers: AUTO_RELAY_PEERS });
    const answer = (peers: number, at: number) => applyLease(key, fast, lease(nextSync(key, fast, from, 0, at).seq, 5, { peers }), at);
    answer(AUTO_DIRECT_PEERS + 1, T0 + 1_000);
    expect(key.relayed).toBe(true);
    answer(AUTO_DIRECT_PEERS, T0 + 2_000);
    expect(key.relayed).toBe(false);
  });

  it("turns to the relay when a sync fails, until an answer reports AUTO_DIRECT_PEERS isolates or fewer", () => {
    const key = leased(5);
    nextSync(key, fast, from, 1, T0 + 1_000);
    syncFailed(key, fast, T0 + 2_000);
    expect(key.relayed).toBe(true);
    applyLease(key, fast, lease(key.outbox!.seq, 5, { peers: AUTO_DIRECT_PEERS }), T0 + 2_500);
    expect(key.relayed).toBe(false);
  });

  it("keeps a rule with another aggregate as it is when a sync fails", () => {
    const none = rule({ name: "n", mode: "fast", limit: 100, syncMs: 1_000, aggregate: undefined });
    const key = freshKey(T0);
    nextSync(key, none, from, 1, T0);
    syncFailed(key, none, T0 + 1_000);
    expect(key.relayed).toBe(false);
  });
});
