import { describe, expect, it } from "vitest";
import { peek, slotOf, type LimiterState, type Policy } from "../../src/algorithms";
import { demandRate, filedAt, grantLease, RATE_BASIS, standingWithPins, type Spent, type SyncRequest } from "../../src/fast/lease";
import { record } from "../../src/fast/lots";
import { PEER_TTL_MS, REPORT_GRACE_MS } from "../../src/fast/peer";
import { indexPeers, leasePolicy, settlePins, type PeerIndex } from "../../src/fast/peer-index";

const T0 = 1_700_000_040_000;
const window: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
const sync = (overrides: Partial<SyncRequest> = {}): SyncRequest => ({
  isolate: "a",
  seq: 1,
  reports: [],
  demand: 0,
  elapsedMs: 0,
  need: 1,
  horizonMs: 2_000,
  ...overrides,
});
/** What every decision sees: the counted state with every pin taken. */
const remaining = (result: { state: LimiterState | undefined; peers: PeerIndex }, at = T0) =>
  standingWithPins(window, result.state, result.peers, at).remaining;

describe("leases", () => {
  it("grants an isolate with no history what it needs, or a sixteenth of the headroom if that is more", () => {
    const small = grantLease(window, undefined, indexPeers(), sync({ need: 3 }), T0);
    expect(small.lease.units).toBe(6);
    expect(remaining(small)).toBe(94);
    expect(grantLease(window, undefined, indexPeers(), sync({ need: 9 }), T0).lease.units).toBe(9);
  });

  it("spares a cold isolate at most eight times what it needs, however much headroom a key has", () => {
    const wide: Policy = { ...window, limit: 100_000 };
    expect(grantLease(wide, undefined, indexPeers(), sync({ need: 1 }), T0).lease.units).toBe(8);
  });

  it("reads one request soon after the last sync at the isolate's rate over an interval, not as a burst", () => {
    // 2 units over the first 2 s interval: 0.001/ms. One more 200 ms later is 0.005/ms alone; with the
    // earlier rate for the other 1.8 s of the interval it is (1 + 1.8) / 2,000 ms.
    const first = grantLease(window, undefined, indexPeers(), sync({ demand: 2, need: 0 }), T0);
    const second = grantLease(window, first.state, first.peers, sync({ seq: 2, demand: 1, elapsedMs: 200, need: 0 }), T0 + 200);
    expect(second.peers.peers.get("a")?.rate).toBeCloseTo(0.0014, 6);
  });

  it("lets a quiet isolate's lease last until its next request has almost surely come after its booked call", () => {
    // One unit in the first 2 s interval: a request every 2 s on average, so seven gaps, 14 s, past the call booked at 2 s.
    const quiet = grantLease(window, undefined, indexPeers(), sync({ demand: 1, need: 0 }), T0);
    expect(quiet.lease.nextSyncAt).toBe(T0 + 2_000);
    expect(quiet.lease.expiresAt).toBe(T0 + 16_000);
  });

  it("ends a very quiet isolate's lease ten intervals after the grant, how long a lease may outlive a reset", () => {
    // One unit in a minute: seven gaps would be seven minutes.
    const rare = grantLease(window, undefined, indexPeers(), sync({ demand: 1, elapsedMs: 60_000, need: 0 }), T0);
    expect(rare.lease.expiresAt).toBe(T0 + 20_000);
  });

  it("lets a quiet isolate whose call is booked past ten intervals keep its lease four intervals past that call", () => {
    // The key's call budget is booked 30 s ahead (thousands of isolates): the lease must outlast that call.
    const far = grantLease(window, undefined, indexPeers(), sync({ demand: 1, need: 0 }), T0, 0, T0 + 30_000);
    expect(far.lease.expiresAt).toBe(far.lease.nextSyncAt + 8_000);
    expect(far.lease.nextSyncAt).toBeGreaterThan(T0 + 30_000);
  });

  it("ends a quiet isolate's lease half an interval after its booked call when the rule has a block, so it hears of a block before admitting again", () => {
    const quiet = grantLease({ ...window, blockMs: 60_000 }, undefined, indexPeers(), sync({ demand: 1, need: 0 }), T0);
    expect(quiet.lease.expiresAt).toBe(T0 + 3_000);
  });

  it("gives an isolate of a key near its limit its share of what the key frees until its next call, when that is more than its share of what is free", () => {
    // 100 units a second; b, as busy as a, holds all but 10. Half of what is free is 5; half of what
    // the key frees until a's call 2 s on is 100: a gets all 10.
    const busy: Policy = { ...window, limit: 6_000 };
    const b = grantLease(busy, undefined, indexPeers(), sync({ isolate: "b", demand: 20, need: 5_990 }), T0);
    const a = grantLease(busy, b.state, b.peers, sync({ demand: 20, need: 0 }), T0 + 1);
    expect(a.lease.units).toBe(10);
  });

  it("gives an isolate of a key near its limit room for bursts beyond its share of what the key frees until its next call", () => {
    // 100 units a second; a and b each ask for half of it, and 200 are free after b's grant. Half
    // of what the key frees until a's call 2 s on is 100; two spreads of that (2 × √100) more is 120,
    // within half of what it frees while the call is answered (50): a lease of 100 runs dry before
    // the call about one time in two, and the request after it waits on the call.
    const busy: Policy = { ...window, limit: 6_000 };
    const b = grantLease(busy, undefined, indexPeers(), sync({ isolate: "b", demand: 100, need: 5_800 }), T0);
    const a = grantLease(busy, b.state, b.peers, sync({ demand: 100, need: 0 }), T0 + 1);
    expect(a.lease.nextSyncAt).toBe(T0 + 1 + 2_000);
    expect(a.lease.units).toBe(120);
  });

  it("gives a quieter isolate of a key near its limit no more room than its share of what the key frees while its call is answered", () => {
    // 10 units a second, half of them a's: 10 until its call, 2 × √10 more would be 16.3, but half
    // of what the key frees in the 1 s left for the answer is 5.
    const quiet: Policy = { ...window, limit: 600 };
    const b = grantLease(quiet, undefined, indexPeers(), sync({ isolate: "b", demand: 10, need: 580 }), T0);
    const a = grantLease(quiet, b.state, b.peers, sync({ demand: 10, need: 0 }), T0 + 1);
    expect(a.lease.units).toBe(15);
  });

  it("pins granted units rather than counting them: the state holds only what was reported spent", () => {
    const { state, peers } = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
    expect(remaining({ state, peers: indexPeers() })).toBe(100);
    expect(remaining({ state, peers })).toBe(70);
  });

  it("grants what is left when the waiting requests need more than that, so some of them are served", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 90 }), T0);
    const short = grantLease(window, first.state, first.peers, sync({ isolate: "b", need: 30 }), T0 + 1);
    expect(short.lease.units).toBe(10);
    expect(short.lease.standing).toMatchObject({ allowed: false });
  });

  it("grants nothing to an isolate letting the key go", () => {
    const result = grantLease(window, undefined, indexPeers(), sync({ need: 0, release: true }), T0);
    expect(result.lease.units).toBe(0);
    expect(remaining(result)).toBe(100);
  });

  it("sizes a lease by the isolate's demand until its booked call is answered, with room for bursts", () => {
    // 10 units in 1 s is 0.01/ms; the next call is booked 2 s on, plus half a horizon for the answer: 30 units, and √30 more.
    const known = grantLease(window, undefined, indexPeers(), sync({ need: 0 }), T0);
    const { lease } = grantLease(window, known.state, known.peers, sync({ seq: 2, demand: 10, elapsedMs: 1_000, need: 0 }), T0 + 1_000);
    expect(lease.nextSyncAt).toBe(T0 + 3_000);
    expect(lease.units).toBe(36);
  });

  it("tops up what the isolate says it will still hold rather than granting on top of it", () => {
    // Two isolates alike but for what they say they hold (grantLease updates the peers in place).
    const next = sync({ seq: 2, demand: 20, elapsedMs: 1_000, need: 0, reports: [{ lease: 1, spent: [{ at: T0, units: 20 }], unspent: 0 }] });
    const second = (held?: number) => {
      const first = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
      return grantLease(window, first.state, first.peers, { ...next, ...(held === undefined ? {} : { held }) }, T0 + 1_000).lease;
    };
    const onTop = second();
    const toppedUp = second(10);
    expect(toppedUp.units).toBe(onTop.units - 10);
    expect(toppedUp.topsUp).toBe(true);
    expect(onTop.topsUp).toBeUndefined();
  });

  it("counts a fraction of a unit its isolate will still hold: a top-up is rounded up once", () => {
    // A key 70 of whose 100 units another isolate holds, shared with two isolates asking 3 a second:
    // the grant tops up to a fair share of what is free and what it holds, between 2.3 and 2.6 units
    // and a share of its holding.
    const second = (held: number) => {
      let r = grantLease(window, undefined, indexPeers(), sync({ isolate: "z", need: 70 }), T0);
      for (const isolate of ["b", "c"]) r = grantLease(window, r.state, r.peers, sync({ isolate, demand: 3, elapsedMs: 1_000, need: 0 }), T0);
      r = grantLease(window, r.state, r.peers, sync({ demand: 1, elapsedMs: 1_000, need: 0 }), T0);
      return grantLease(window, r.state, r.peers, sync({ seq: 2, demand: 1, elapsedMs: 1_000, need: 0, held }), T0 + 1_000).lease.units;
    };
    expect(second(0)).toBe(3);
    expect(second(0.3)).toBe(3);
    // Held counts in the share it is topped up to as well, so 0.6 still leaves 3; floored, 0.9 would count as nothing and leave 3 again.
    expect(second(0.6)).toBe(3);
    expect(second(0.9)).toBe(2);
  });

  it("renews the leases an isolate holds when it tops them up: they end with the new one", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
    const next = sync({ seq: 2, demand: 20, elapsedMs: 1_000, need: 0, held: 10, reports: [{ lease: 1, spent: [{ at: T0, units: 20 }], unspent: 0 }] });
    const topped = grantLease(window, first.state, first.peers, next, T0 + 1_000);
    expect(topped.lease.expiresAt).toBeGreaterThan(first.lease.expiresAt);
    expect(topped.peers.peers.get("a")?.pins.map((p) => p.until)).toEqual([topped.lease.expiresAt, topped.lease.expiresAt]);
  });

  it("never leases more than the limit, counting every isolate's pins as taken", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ demand: 1_000, elapsedMs: 1_000 }), T0);
    expect(first.lease.units).toBe(100);
    const second = grantLease(window, first.state, first.peers, sync({ isolate: "b", need: 1 }), T0 + 1);
    expect(second.lease.units).toBe(0);
    expect(second.lease.standing).toMatchObject({ allowed: false });
    expect(second.lease.standing.retryAfter).toBeGreaterThan(0);
  });

  it("shares what is left by demand: a busy isolate gets more than a quiet one", () => {
    const quiet = grantLease(window, undefined, indexPeers(), sync({ isolate: "quiet", demand: 1, elapsedMs: 1_000, need: 0 }), T0);
    const busy = grantLease(window, quiet.state, quiet.peers, sync({ isolate: "busy", demand: 500, elapsedMs: 1_000, need: 0 }), T0);
    expect(busy.lease.units).toBeGreaterThan(quiet.lease.units);
    expect(busy.lease.units).toBeLessThanOrEqual(98);
  });

  it("answers a retried sync with the same lease and counts nothing again", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 5 }), T0);
    const retry = grantLease(window, first.state, first.peers, sync({ need: 5 }), T0 + 10);
    expect(retry.lease).toEqual(first.lease);
    expect(retry.state).toBe(first.state);
  });

  it("counts reported spends once, and frees what a finished lease did not spend", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
    const report = sync({ seq: 2, need: 0, release: true, reports: [{ lease: 1, spent: [{ at: T0, units: 10 }], unspent: 20 }] });
    const applied = grantLease(window, first.state, first.peers, report, T0 + 5);
    expect(remaining(applied, T0 + 5)).toBe(90);
    const retried = grantLease(window, applied.state, applied.peers, report, T0 + 6);
    expect(retried.state).toBe(applied.state);
    expect(remaining(retried, T0 + 6)).toBe(90);
  });

  it("keeps pinned what a live lease has neither spent nor given back", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
    const report = sync({ seq: 2, need: 0, release: true, reports: [{ lease: 1, spent: [{ at: T0, units: 5 }], unspent: 0 }] });
    const applied = grantLease(window, first.state, first.peers, report, T0 + 5);
    expect(remaining({ state: applied.state, peers: indexPeers() }, T0 + 5)).toBe(95);
    expect(remaining(applied, T0 + 5)).toBe(70);
  });

  it("counts a pin whose isolate never reports as spent, once the grace after its lease has passed", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 30 }), T0);
    const late = first.lease.expiresAt + REPORT_GRACE_MS;
    const other = grantLease(window, first.state, first.peers, sync({ isolate: "b", need: 0, release: true }), late);
    expect(remaining({ state: other.state, peers: indexPeers() }, late)).toBe(70);
    expect(other.peers.peers.get("a")?.pins).toEqual([]);
    // The isolate's report arrives after all: its lease is already counted, so nothing counts twice.
    const report = sync({ seq: 2, need: 0, release: true, reports: [{ lease: 1, spent: [{ at: T0, units: 30 }], unspent: 0 }] });
    expect(remaining(grantLease(window, other.state, other.peers, report, late + 1), late + 1)).toBe(70);
  });

  it("lets a lease outlast the bucket it was granted in, until its booked call is answered", () => {
    const { lease } = grantLease(window, undefined, indexPeers(), sync({ horizonMs: 2_000 }), T0 + 59_500);
    expect(lease.nextSyncAt).toBe(T0 + 61_500);
    expect(lease.expiresAt).toBe(T0 + 62_500);
  });

  it("grants the longer lease an isolate offers to take when the key stays far from its limit after the grant", () => {
    const roomy = grantLease(window, undefined, indexPeers(), sync({ need: 1, roomyHorizonMs: 20_000 }), T0);
    expect(roomy.lease.units).toBe(6);
    expect(roomy.lease.expiresAt).toBe(T0 + 20_000);
    expect(roomy.peers.peers.get("a")?.pins).toEqual([{ lease: 1, units: 6, until: T0 + 20_000 }]);
  });

  it("keeps the asked horizon when the grant leaves the key near its limit", () => {
    const tight = grantLease(window, undefined, indexPeers(), sync({ need: 20, roomyHorizonMs: 20_000 }), T0);
    expect(tight.lease.units).toBe(20);
    expect(tight.lease.expiresAt).toBe(T0 + 3_000);
    const none = grantLease(window, undefined, indexPeers(), sync({ need: 0, release: true, roomyHorizonMs: 20_000 }), T0);
    expect(none.lease.expiresAt).toBe(T0 + 3_000);
  });

  it("counts recently heard isolates as peers", () => {
    const a = grantLease(window, undefined, indexPeers(), sync({ isolate: "a" }), T0);
    const b = grantLease(window, a.state, a.peers, sync({ isolate: "b" }), T0 + 100);
    expect(b.lease.peers).toBe(2);
    const later = grantLease(window, b.state, b.peers, sync({ isolate: "c" }), T0 + 100_000);
    expect(later.lease.peers).toBe(1);
  });
});

describe("an isolate's demand rate", () => {
  const quiet = { rate: 0.001, basis: RATE_BASIS };

  it("takes a new isolate's first request, spread over an interval, as a guess measured over nothing", () => {
    expect(demandRate(undefined, sync({ demand: 1, elapsedMs: 0 }))).toEqual({ rate: 0.0005, basis: 0 });
  });

  it("reads a quiet isolate's few requests together with the earlier ones, up to twenty units in all", () => {
    // 5 units in 2.5 s with 15 more at the earlier 1 a second, over the 15 s those took.
    const { rate, basis } = demandRate(quiet, sync({ demand: 5, elapsedMs: 2_500 }));
    expect(rate).toBeCloseTo(20 / 17_500, 9);
    expect(basis).toBe(RATE_BASIS);
  });

  it("carries no more of the earlier rate than the units it was measured over", () => {
    // The earlier rate rests on 2 units: 5 now and those 2, over 2.5 s and the 2 s they took.
    expect(demandRate({ rate: 0.001, basis: 2 }, sync({ demand: 5, elapsedMs: 2_500 })).rate).toBeCloseTo(7 / 4_500, 9);
  });

  it("reads a sync that counted twenty units or more on its own", () => {
    expect(demandRate(quiet, sync({ demand: 24, elapsedMs: 20_000 })).rate).toBeCloseTo(24 / 20_000, 9);
  });

  it("starts afresh from a count the earlier rate could not plausibly have produced, so a flash crowd is followed at once", () => {
    // 2.5 units were expected in 2.5 s (± 3 × 1.6 + 1); 25 came.
    expect(demandRate(quiet, sync({ demand: 25, elapsedMs: 2_500 }))).toEqual({ rate: 0.01, basis: RATE_BASIS });
    expect(demandRate({ rate: 0.01, basis: RATE_BASIS }, sync({ demand: 0, elapsedMs: 2_500 })).rate).toBe(0);
  });

  it("keeps what the rate was measured over in the isolate's row", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ demand: 1, need: 0 }), T0);
    expect(first.peers.peers.get("a")?.basis).toBe(0);
    const second = grantLease(window, first.state, first.peers, sync({ seq: 2, demand: 3, elapsedMs: 2_000, need: 0 }), T0 + 2_000);
    expect(second.peers.peers.get("a")?.basis).toBe(3);
  });
});

describe("leases at scale", () => {
  it("counts what onError admitted without a lease, in the slots it was admitted in", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 0 }), T0);
    const after = grantLease(window, first.state, first.peers, sync({ seq: 2, need: 0, release: true, unleased: [{ at: T0, units: 7 }] }), T0 + 1);
    expect(remaining({ state: after.state, peers: indexPeers() }, T0 + 1)).toBe(93);
  });

  it("uncounts units a report already counted, given back since, in the slots they were spent in", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 0 }), T0);
    const counted = grantLease(window, first.state, first.peers, sync({ seq: 2, need: 0, release: true, unleased: [{ at: T0, units: 7 }] }), T0 + 1);
    const after = grantLease(window, counted.state, counted.peers, sync({ seq: 3, need: 0, release: true, refunds: [{ at: T0, units: 2 }] }), T0 + 2);
    expect(remaining({ state: after.state, peers: indexPeers() }, T0 + 2)).toBe(95);
  });

  it("counts units charged past an isolate's lease, a refund taken back, past the limit: the key owes", () => {
    const first = grantLease(window, undefined, indexPeers(), sync({ need: 0 }), T0);
    const after = grantLease(window, first.state, first.peers, sync({ seq: 2, need: 1, refunds: [{ at: T0, units: -130 }] }), T0 + 1);
    expect(remaining({ state: after.state, peers: indexPeers() }, T0 + 1)).toBe(0);
    expect(after.lease.units).toBe(0);
    expect(after.lease.standing.allowed).toBe(false);
  });

  it("leaves a token bucket owing a year's refill at most for what an isolate charged past its lease", () => {
    const daily: Policy = { algorithm: "token-bucket", limit: 1, periodMs: 86_400_000, burst: 1, buckets: 1 };
    const first = grantLease(daily, undefined, indexPeers(), sync({ need: 0 }), T0);
    const after = grantLease(daily, first.state, first.peers, sync({ seq: 2, need: 0, release: true, refunds: [{ at: T0, units: -1_000_000 }] }), T0 + 1);
    const standing = peek(daily, after.state, T0 + 1);
    expect(standing.moreAt - T0).toBeLessThanOrEqual(367 * 86_400_000);
    expect(standing.moreAt - T0).toBeGreaterThan(364 * 86_400_000);
  });

  it("tells the isolates of a saturated key to wait for their booked call once their lease is spent", () => {
    const busy = grantLease(window, undefined, indexPeers(), sync({ need: 100 }), T0);
    const { lease } = grantLease(window, busy.state, busy.peers, sync({ isolate: "b", demand: 100, elapsedMs: 1_000, need: 1 }), T0 + 1_000);
    expect(lease.saturated).toBe(true);
    expect(lease.units).toBe(0);
  });
});

describe("leases at a key near its limit", () => {
  it("tops up an isolate that holds more than the free units from all of them when no other isolate wants them", () => {
    const slow: Policy = { ...window, limit: 300, periodMs: 3_600_000 };
    const first = grantLease(slow, undefined, indexPeers(), sync({ need: 275 }), T0);
    const { lease } = grantLease(slow, first.state, first.peers, sync({ seq: 2, demand: 80, elapsedMs: 300, need: 0, held: 77 }), T0 + 300);
    expect(lease.units).toBe(25);
  });
});

describe("leases of a token bucket", () => {
  // 10 every 4 s: one token back every 400 ms.
  const bucket: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 4_000, burst: 10, buckets: 1 };
  const burst = () => grantLease(bucket, undefined, indexPeers(), sync({ need: 10 }), T0);
  const told = (spentAt: number, at: number) => {
    const granted = burst();
    const report = { lease: 1, spent: [{ at: slotOf(bucket, spentAt), units: 10 }], unspent: 0 };
    return grantLease(bucket, granted.state, granted.peers, sync({ seq: 2, need: 1, reports: [report] }), at, 0, granted.cursor);
  };

  it("counts a lease's units at the end of the tick they were spent in, so a burst told a second later has refilled since", () => {
    // Spent in T0's 62 ms tick: refilled for the 938 ms or so after it, two whole tokens, one of them the waiting request's.
    expect(told(T0, T0 + 1_000).lease.units).toBeGreaterThanOrEqual(1);
    expect(told(T0, T0 + 1_000).lease.standing.allowed).toBe(true);
  });

  it("reads the times a lease's units were spent at by how long before the sync they were, so an isolate whose clock runs behind gains nothing", () => {
    // The isolate's clock is a second behind the object's: it spends the ten at object time T0 + 1,000 and syncs at once.
    const granted = burst();
    const behind = 1_000;
    const report = { lease: 1, spent: [{ at: slotOf(bucket, T0 + 1_000 - behind), units: 10 }], unspent: 0 };
    const told = grantLease(bucket, granted.state, granted.peers, sync({ seq: 2, need: 0, reports: [report], sentAt: T0 + 1_000 - behind }), T0 + 1_000, 0, granted.cursor);
    expect(standingWithPins(bucket, told.state, indexPeers(), T0 + 1_000).remaining).toBe(0);
  });

  it("counts a lease its isolate never reported as spent a grace after it ended: the isolate stopped by its own clock", () => {
    const granted = burst();
    const until = granted.lease.expiresAt;
    const settled = settlePins(bucket, granted.state, granted.peers, until + REPORT_GRACE_MS + 1_000);
    // Taken at until + 10 s, then a second's refill: 2.5 tokens, not the full bucket eleven seconds would give.
    expect(peek(bucket, settled.state, until + REPORT_GRACE_MS + 1_000).remaining).toBe(2);
  });

  it("reads the times a token bucket's units were spent at by how long before the sync they were under another version's fixed window too", () => {
    // The isolate runs a second behind: five spent 500 ms into the object's window, told 100 ms later, belong to that window.
    const fixed: Policy = { algorithm: "fixed-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
    const start = T0 - (T0 % 60_000) + 60_000;
    const behind = 1_000;
    const place = filedAt(bucket, fixed, start + 600, start + 600 - behind);
    expect(place({ at: slotOf(bucket, start + 500 - behind), units: 5 })).toBeGreaterThanOrEqual(start + 500);
  });

  it("gives back a token bucket isolate's refund when the object leases under another version's gcra", () => {
    const gcra: Policy = { algorithm: "gcra", limit: 10, periodMs: 4_000, burst: 10, buckets: 1 };
    expect(filedAt(bucket, gcra, T0 + 1_000, T0 + 1_000)({ at: slotOf(bucket, T0), units: -2 })).toBe(slotOf(bucket, T0));
  });

  it("counts units an isolate of an earlier version filed under 0 as taken when it tells them, the cautious side", () => {
    const granted = burst();
    const report = { lease: 1, spent: [{ at: 0, units: 10 }], unspent: 0 };
    const undated = grantLease(bucket, granted.state, granted.peers, sync({ seq: 2, need: 1, reports: [report] }), T0 + 1_000, 0, granted.cursor);
    expect(undated.lease.units).toBe(0);
  });

  // 10 a minute: one token every 6 s, counted from the end of the 937 ms tick the leased units are spent in.
  const tenAMinute: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
  const tickLeft = slotOf(tenAMinute, T0) - T0;

  it("tells a crowd a grant cannot cover when its costliest request would pass, not when all of them together could", () => {
    // Thirty waiting at a fresh key take all ten: one more comes 6 s on, three 18 s on.
    const crowd = grantLease(tenAMinute, undefined, indexPeers(), sync({ need: 30, costliest: 1 }), T0);
    expect(crowd.lease.units).toBe(10);
    expect(crowd.lease.standing).toMatchObject({ allowed: false, reason: "limit", retryAfter: 6_000 + tickLeft });
    // Three come 18 s after the ten are taken: if the isolate has not reported them by their lease's
    // end and the grace after it, the object takes them then, and the three come 18 s after that.
    const costly = grantLease(tenAMinute, undefined, indexPeers(), sync({ need: 30, costliest: 3 }), T0).lease;
    expect(costly.standing.retryAfter).toBe(costly.expiresAt + REPORT_GRACE_MS - T0 + 18_000);
  });

  it("tells a lone waiting request the grant cannot cover when a request of its cost would pass", () => {
    const drained = grantLease(tenAMinute, undefined, indexPeers(), sync({ need: 10 }), T0);
    const costly = grantLease(tenAMinute, drained.state, drained.peers, sync({ isolate: "b", need: 5 }), T0);
    expect(costly.lease.units).toBe(0);
    expect(costly.lease.standing.retryAfter).toBe(30_000 + tickLeft);
  });

  it("leases a crowd larger than the burst what fits at a rule with a block, as strict mode admits it", () => {
    const blocking: Policy = { ...tenAMinute, blockMs: 60_000 };
    expect(grantLease(blocking, undefined, indexPeers(), sync({ need: 30, costliest: 1 }), T0).lease.units).toBe(10);
  });

  it("counts units reported out of the order they went in that order: five at T0 and five told before them at T0 + 2 s leave five", () => {
    const unleased = [
      { at: slotOf(bucket, T0 + 2_000), units: 5 },
      { at: slotOf(bucket, T0), units: 5 },
    ];
    const first = grantLease(bucket, undefined, indexPeers(), sync({ need: 0 }), T0 - 1_000);
    const told = grantLease(bucket, first.state, first.peers, sync({ seq: 2, need: 0, unleased, sentAt: T0 + 2_100 }), T0 + 2_100, 0, first.cursor);
    expect(peek(bucket, told.state, T0 + 2_100).remaining).toBe(5);
  });
});

describe("leases after an outage", () => {
  // Ten minutes without the object, one unit admitted each second by onError at a key of 60 a minute.
  const bucket: Policy = { algorithm: "token-bucket", limit: 60, periodMs: 60_000, burst: 60, buckets: 1 };
  const outage = (policy: Policy) => {
    const unleased: Spent[] = [];
    for (let s = 1; s <= 600; s++) record(unleased, slotOf(bucket, T0 + s * 1_000), 1);
    const now = T0 + 601_000;
    const first = grantLease(policy, undefined, indexPeers(), sync({ need: 0 }), T0, 0, Number.NEGATIVE_INFINITY, bucket);
    return grantLease(policy, first.state, first.peers, sync({ seq: 2, need: 1, unleased, sentAt: now }), now, 0, first.cursor, bucket);
  };

  it("counts a token bucket's outage admissions at the rule's rate in the ticks they went: the key is free when the object is back", () => {
    const back = outage(bucket);
    expect(back.lease.standing.allowed).toBe(true);
    expect(back.lease.units).toBeGreaterThanOrEqual(1);
  });

  it("counts them so under another live version's gcra too", () => {
    const back = outage({ algorithm: "gcra", limit: 60, periodMs: 60_000, burst: 5, buckets: 1 });
    expect(back.lease.standing.allowed).toBe(true);
    expect(back.lease.units).toBeGreaterThanOrEqual(1);
  });

  it("leaves the looser of two live versions no more room after onError's flood than had it leased alone", () => {
    // Version A: 1,000 a minute; version B, live at once, 10 a minute, so the object leases under B.
    const a: Policy = { algorithm: "token-bucket", limit: 1_000, periodMs: 60_000, burst: 1_000, buckets: 1 };
    const b: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
    const flood = [{ at: slotOf(a, T0 + 10_000), units: 6_000 }];
    const reported = (under: Policy) => {
      const first = grantLease(under, undefined, indexPeers(), sync({ need: 0 }), T0, 0, Number.NEGATIVE_INFINITY, a);
      return grantLease(under, first.state, first.peers, sync({ seq: 2, need: 0, unleased: flood, sentAt: T0 + 20_000 }), T0 + 20_000, 0, first.cursor, a).state;
    };
    // Read by A once B's isolates have gone quiet.
    const readAt = T0 + 20_000 + PEER_TTL_MS + 1;
    expect(peek(a, reported(b), readAt).remaining).toBeLessThanOrEqual(peek(a, reported(a), readAt).remaining);
  });

  it("leaves a token bucket another version leases by at most its own period's wait after a flood a window version let through", () => {
    // A window owes nothing past its period: its isolates' flood costs the bucket only the bucket's own allowance.
    const strict: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
    const asked: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
    const flood = [{ at: slotOf(asked, T0 - 1_000), units: 1_000 }];
    const after = grantLease(strict, undefined, indexPeers(), sync({ need: 0, unleased: flood, sentAt: T0 }), T0, 0, Number.NEGATIVE_INFINITY, asked);
    expect(peek(strict, after.state, T0).retryAfter).toBeLessThanOrEqual(60_000);
  });

  it("leaves a token bucket flooded by onError allow at most a period's wait", () => {
    const first = grantLease(bucket, undefined, indexPeers(), sync({ need: 0 }), T0);
    const unleased = [{ at: slotOf(bucket, T0 + 10_000), units: 6_000 }];
    const back = grantLease(bucket, first.state, first.peers, sync({ seq: 2, need: 1, unleased, sentAt: T0 + 20_000 }), T0 + 20_000, 0, first.cursor);
    expect(back.lease.standing.retryAfter).toBeLessThanOrEqual(60_000);
  });
});

describe("leases at a key with nothing to spare", () => {
  /** Isolate "a" holds 98 of the window's 100; "b", asking at a pace the key sustains, finds 2 free. */
  const crowded = () => grantLease(window, undefined, indexPeers(), sync({ need: 98 }), T0);
  const modest = (overrides: Partial<SyncRequest> = {}) => sync({ isolate: "b", demand: 2, elapsedMs: 1_000, need: 0, ...overrides });

  it("tells an isolate whose grant was cut short by what is free to wait for its booked call once its lease is spent", () => {
    const a = crowded();
    const { lease } = grantLease(window, a.state, a.peers, modest(), T0 + 1_000);
    expect(lease.units).toBe(2);
    expect(lease.saturated).toBe(true);
  });

  it("leaves an isolate whose grant the key paid in full free to call again when its lease runs low", () => {
    const { lease } = grantLease(window, undefined, indexPeers(), modest(), T0);
    expect(lease.saturated).toBe(false);
  });

  it("does not hold an isolate that gives its lease back: a release asks for nothing", () => {
    const a = crowded();
    const { lease } = grantLease(window, a.state, a.peers, modest({ release: true }), T0 + 1_000);
    expect(lease.saturated).toBe(false);
  });
});

describe("leases under a block", () => {
  const blocking: Policy = { ...window, blockMs: 600_000 };

  it("starts the block when the waiting requests are denied, and then leases nothing", () => {
    const first = grantLease(blocking, undefined, indexPeers(), sync({ need: 90 }), T0);
    const denied = grantLease(blocking, first.state, first.peers, sync({ isolate: "b", need: 30 }), T0 + 1);
    expect(denied.lease.units).toBe(0);
    expect(denied.lease.standing).toMatchObject({ allowed: false, reason: "blocked", retryAfter: 600_000 });
    expect(denied.blockedUntil).toBe(T0 + 1 + 600_000);
  });

  it("starts no block from the standing after a grant that covered every waiting request", () => {
    const all = grantLease(blocking, undefined, indexPeers(), sync({ need: 100 }), T0);
    expect(all.lease.units).toBe(100);
    expect(all.blockedUntil).toBe(0);
  });

  it("leases nothing to any isolate while blocked, and tells each when the block ends", () => {
    const during = grantLease(blocking, undefined, indexPeers(), sync({ isolate: "c", need: 1 }), T0, T0 + 5_000);
    expect(during.lease.units).toBe(0);
    expect(during.lease.standing).toMatchObject({ reason: "blocked", retryAfter: 5_000 });
    expect(during.blockedUntil).toBe(T0 + 5_000);
  });

  it("starts no block for a request the units its isolate still holds and the grant pay for together", () => {
    const tenBlocking: Policy = { ...window, limit: 10, burst: 10, blockMs: 60_000 };
    const first = grantLease(tenBlocking, undefined, indexPeers(), sync({ need: 8 }), T0);
    expect(first.lease.units).toBe(8);
    // 6 of the 8 spent, 2 still held: a request of 3 needs 1 more of the 2 free.
    const spent = { lease: first.lease.seq, spent: [{ at: T0, units: 6 }], unspent: 0 };
    const next = grantLease(tenBlocking, first.state, first.peers, sync({ seq: 2, reports: [spent], need: 3, held: 2 }), T0 + 1, 0, first.cursor);
    expect(next.blockedUntil).toBe(0);
    expect(next.lease.units).toBeGreaterThanOrEqual(1);
  });

  it("tells the costliest request waiting under a block when its cost fits, and one unit when the block ends", () => {
    const short: Policy = { ...blocking, blockMs: 5_000 };
    const first = grantLease(short, undefined, indexPeers(), sync({ need: 98 }), T0);
    const during = grantLease(short, first.state, first.peers, sync({ isolate: "c", need: 8, costliest: 5 }), T0 + 1, T0 + 5_000);
    expect(during.lease.standing).toMatchObject({ reason: "blocked", moreAt: T0 + 5_000 });
    // The 98 leased units count as taken until reported: 5 more fit only once they leave the window, a minute on at least.
    expect(during.lease.standing.retryAfter).toBeGreaterThanOrEqual(60_000 - 1);
  });
});

describe("leases when Worker versions disagree on the limit", () => {
  const lowered: Policy = { ...window, limit: 10, burst: 10 };
  /** An isolate of each version syncs once: "old" under the window's 100 takes 8, then "new" under 10 takes the 2 left. */
  function bothVersions() {
    const old = grantLease(window, undefined, indexPeers(), sync({ isolate: "old", need: 8, roomyHorizonMs: 20_000 }), T0);
    const under = leasePolicy(lowered, "new", old.peers, T0 + 100);
    return grantLease(under, old.state, old.peers, sync({ isolate: "new", need: 2 }), T0 + 100, 0, old.cursor, lowered);
  }

  it("leases an isolate under the lower limit another live isolate asks under", () => {
    const both = bothVersions();
    expect(leasePolicy(window, "old", both.peers, T0 + 200)).toEqual(lowered);
  });

  it("leases under the caller's own limit when it is the strictest", () => {
    expect(leasePolicy(lowered, "new", bothVersions().peers, T0 + 200)).toEqual(lowered);
  });

  it("goes back to the caller's higher limit once the isolate that asked for less has not been live for the peer TTL", () => {
    const both = bothVersions();
    expect(both.lease.units).toBe(2);
    // Long after, a sync counts the silent isolate's pins as spent; then nothing keeps it live.
    const gone = T0 + 100 + PEER_TTL_MS + 20_000 + REPORT_GRACE_MS;
    const settled = grantLease(window, both.state, both.peers, sync({ isolate: "old", seq: 2, need: 0, release: true }), gone, 0, both.cursor);
    expect(leasePolicy(window, "old", settled.peers, gone + 1)).toEqual(window);
  });

  it("counts what a calendar month's isolate spent under another version's 31-day window, whose windows are as long but fall otherwise", () => {
    const DAY = 86_400_000;
    const month: Policy = { algorithm: "fixed-window", limit: 100, periodMs: 31 * DAY, burst: 100, buckets: 1, months: 1 };
    const days31: Policy = { algorithm: "fixed-window", limit: 90, periodMs: 31 * DAY, burst: 90, buckets: 1 };
    // 2027-03-20: the 31-day window began on the 17th, the calendar month on the 1st.
    const t = Date.UTC(2027, 2, 20, 12);
    const other = grantLease(days31, undefined, indexPeers(), sync({ isolate: "b", need: 1, demand: 1 }), t);
    const first = grantLease(days31, other.state, other.peers, sync({ need: 89, demand: 89 }), t + 1, 0, other.cursor, month);
    const spent = [{ at: slotOf(month, t + 1_000), units: first.lease.units }];
    const second = grantLease(days31, first.state, first.peers, sync({ seq: 2, need: 89, demand: 89, reports: [{ lease: 1, spent, unspent: 0 }] }), t + 2_000, 0, first.cursor, month);
    expect(first.lease.units + second.lease.units).toBeLessThanOrEqual(90 - other.lease.units);
  });

  it("names the algorithm it leased under when another version's rule chose it, so the isolate reads the standing by it", () => {
    const windowed: Policy = { ...lowered, algorithm: "fixed-window" };
    const old = grantLease(window, undefined, indexPeers(), sync({ isolate: "old", need: 1 }), T0);
    const under = leasePolicy(windowed, "new", old.peers, T0 + 100);
    const fresh = grantLease(under, old.state, old.peers, sync({ isolate: "new", need: 1 }), T0 + 100, 0, old.cursor, windowed);
    expect(fresh.lease.algorithm).toBe("fixed-window");
    const again = grantLease(leasePolicy(window, "old", fresh.peers, T0 + 200), fresh.state, fresh.peers, sync({ isolate: "old", seq: 2, need: 1 }), T0 + 200, 0, fresh.cursor, window);
    expect(again.lease.algorithm).toBe("fixed-window");
  });

  it("counts a token bucket isolate's report at the time it was made, and keeps counted what it gives back, whose slot means nothing here", () => {
    const bucket: Policy = { algorithm: "token-bucket", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
    const first = grantLease(window, undefined, indexPeers(), sync({ isolate: "b", need: 10 }), T0, 0, Number.NEGATIVE_INFINITY, bucket);
    const spent = sync({ isolate: "b", seq: 2, need: 0, reports: [{ lease: 1, spent: [{ at: 0, units: 10 }, { at: 0, units: -4 }], unspent: 0 }] });
    const reported = grantLease(window, first.state, first.peers, spent, T0 + 1_000, 0, first.cursor, bucket);
    expect(standingWithPins(window, reported.state, indexPeers(), T0 + 1_000).remaining).toBe(90);
  });

  it("leases under a lower limit a strict decision asked under", () => {
    expect(leasePolicy(window, "old", indexPeers(), T0, [lowered])).toEqual(lowered);
  });

  it("tells an isolate whose unreported lease was granted under a higher limit to give it up, and grants it nothing past the lower one", () => {
    const both = bothVersions();
    const at = T0 + 1_000;
    const under = leasePolicy(window, "old", both.peers, at);
    const report = { lease: 1, spent: [{ at: T0, units: 6 }], unspent: 0 };
    const old = grantLease(under, both.state, both.peers, sync({ isolate: "old", seq: 2, need: 1, reports: [report] }), at, 0, both.cursor, window);
    expect(old.lease.revoke).toBe(true);
    // Its 2 unspent units stay pinned until it reports them, and "new" holds the other 2 of the 10.
    expect(old.lease.units).toBe(0);
    expect(old.lease.standing).toMatchObject({ allowed: false, limit: 10 });
  });

  it("has an isolate denied under another version's lower limit ask again within its interval, not when that limit frees units", () => {
    const both = bothVersions();
    const at = T0 + 1_000;
    const under = leasePolicy(window, "old", both.peers, at);
    const old = grantLease(under, both.state, both.peers, sync({ isolate: "old", seq: 2, need: 1 }), at, 0, both.cursor, window);
    expect(old.lease.standing.allowed).toBe(false);
    // Under its own 10 the key frees a unit only as the minute's window slides; that version may be gone long before.
    expect(old.lease.standing.retryAfter).toBeLessThanOrEqual(2_000);
    expect(old.lease.standing.moreAt).toBeLessThanOrEqual(at + 2_000);
    const own = grantLease(lowered, both.state, both.peers, sync({ isolate: "new", seq: 2, need: 1 }), at, 0, both.cursor, lowered);
    expect(own.lease.standing.retryAfter).toBeGreaterThan(2_000);
  });

  it("does not tell an isolate to give up a lease granted under the limit it is leased under now", () => {
    const both = bothVersions();
    const at = T0 + 1_000;
    const again = grantLease(lowered, both.state, both.peers, sync({ isolate: "new", seq: 2, need: 0 }), at, 0, both.cursor, lowered);
    expect(again.lease.revoke).toBeUndefined();
  });

  it("stops telling an isolate to give up its leases once it has reported them", () => {
    const both = bothVersions();
    const told = grantLease(lowered, both.state, both.peers, sync({ isolate: "old", seq: 2, need: 0 }), T0 + 1_000, 0, both.cursor, window);
    const oldLot = told.peers.peers.get("old")!.pins[0]!;
    const gaveUp = sync({ isolate: "old", seq: 3, need: 0, reports: [{ lease: 1, spent: [], unspent: oldLot.units }] });
    const after = grantLease(lowered, told.state, told.peers, gaveUp, T0 + 2_000, 0, told.cursor, window);
    expect(after.lease.revoke).toBeUndefined();
    expect(after.peers.peers.get("old")!.pins.every((p) => p.lease !== 1)).toBe(true);
  });
});
