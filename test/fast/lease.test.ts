import { describe, expect, it } from "vitest";
import { peek, type LimiterState, type Policy } from "../../src/algorithms";
import { grantLease, type Peer, type SyncRequest } from "../../src/fast/lease";

const T0 = 1_700_000_040_000;
const window: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };
const sync = (overrides: Partial<SyncRequest> = {}): SyncRequest => ({
  isolate: "a",
  seq: 1,
  returns: [],
  demand: 0,
  elapsedMs: 0,
  need: 1,
  horizonMs: 2_000,
  ...overrides,
});
const remaining = (state: LimiterState | undefined, at = T0) => peek(window, state, at).remaining;

describe("leases", () => {
  it("grants an isolate with no history what it needs, or a sixteenth of the headroom if that is more", () => {
    const small = grantLease(window, undefined, new Map(), sync({ need: 3 }), T0);
    expect(small.lease.units).toBe(6);
    expect(remaining(small.state)).toBe(94);
    expect(grantLease(window, undefined, new Map(), sync({ need: 9 }), T0).lease.units).toBe(9);
  });

  it("grants what is left when the waiting requests need more than that, so some of them are served", () => {
    const first = grantLease(window, undefined, new Map(), sync({ need: 90 }), T0);
    const short = grantLease(window, first.state, new Map([["a", first.peer]]), sync({ isolate: "b", need: 30 }), T0 + 1);
    expect(short.lease.units).toBe(10);
    expect(short.lease.standing).toMatchObject({ allowed: false });
  });

  it("grants nothing to an isolate letting the key go", () => {
    const { lease, state } = grantLease(window, undefined, new Map(), sync({ need: 0, release: true }), T0);
    expect(lease.units).toBe(0);
    expect(remaining(state)).toBe(100);
  });

  it("sizes a lease by the isolate's demand over the horizon", () => {
    // 10 units in 1 s is 0.01/ms; over a 2 s horizon, 20 units.
    const { lease } = grantLease(window, undefined, new Map(), sync({ demand: 10, elapsedMs: 1_000 }), T0);
    expect(lease.units).toBe(20);
  });

  it("counts granted units at once, so leases never exceed the limit", () => {
    const first = grantLease(window, undefined, new Map(), sync({ demand: 1_000, elapsedMs: 1_000 }), T0);
    expect(first.lease.units).toBe(100);
    const second = grantLease(window, first.state, new Map([["a", first.peer]]), sync({ isolate: "b", need: 1 }), T0 + 1);
    expect(second.lease.units).toBe(0);
    expect(second.lease.standing).toMatchObject({ allowed: false });
    expect(second.lease.standing.retryAfter).toBeGreaterThan(0);
  });

  it("shares what is left by demand: a busy isolate gets more than a quiet one", () => {
    const peers = new Map<string, Peer>();
    const quiet = grantLease(window, undefined, peers, sync({ isolate: "quiet", demand: 1, elapsedMs: 1_000, need: 0 }), T0);
    peers.set("quiet", quiet.peer);
    const busy = grantLease(window, quiet.state, peers, sync({ isolate: "busy", demand: 500, elapsedMs: 1_000, need: 0 }), T0);
    expect(busy.lease.units).toBeGreaterThan(quiet.lease.units);
    expect(busy.lease.units).toBeLessThanOrEqual(98);
  });

  it("answers a retried sync with the same lease and counts nothing again", () => {
    const first = grantLease(window, undefined, new Map(), sync({ need: 5 }), T0);
    const peers = new Map([["a", first.peer]]);
    const retry = grantLease(window, first.state, peers, sync({ need: 5 }), T0 + 10);
    expect(retry.lease).toEqual(first.lease);
    expect(retry.state).toBe(first.state);
  });

  it("gives a retried sync's returns back once", () => {
    const first = grantLease(window, undefined, new Map(), sync({ need: 30 }), T0);
    const returning = sync({ seq: 2, need: 0, returns: [{ units: 20, countedAt: T0 }] });
    const applied = grantLease(window, first.state, new Map([["a", first.peer]]), returning, T0 + 5);
    const retried = grantLease(window, applied.state, new Map([["a", applied.peer]]), returning, T0 + 6);
    expect(retried.state).toBe(applied.state);
    expect(remaining(retried.state, T0 + 6)).toBe(90 - applied.lease.units);
  });

  it("gives returned units back to the bucket that counted them", () => {
    const first = grantLease(window, undefined, new Map(), sync({ need: 30 }), T0);
    const peers = new Map([["a", first.peer]]);
    const back = grantLease(window, first.state, peers, sync({ seq: 2, need: 0, returns: [{ units: 25, countedAt: T0 }], release: true }), T0 + 5);
    expect(remaining(back.state, T0 + 5)).toBe(95);
  });

  it("ends a lease with the sliding-window bucket that counted it", () => {
    const { lease } = grantLease(window, undefined, new Map(), sync({ horizonMs: 2_000 }), T0 + 59_500);
    expect(lease.expiresAt).toBe(T0 + 60_000);
  });

  it("ends a token-bucket lease after the horizon", () => {
    const bucket: Policy = { algorithm: "token-bucket", limit: 10, periodMs: 1_000, burst: 10, buckets: 1 };
    const { lease } = grantLease(bucket, undefined, new Map(), sync({ horizonMs: 2_000 }), T0 + 59_500);
    expect(lease.expiresAt).toBe(T0 + 61_500);
  });

  it("counts recently heard isolates as peers", () => {
    const peers = new Map<string, Peer>();
    const a = grantLease(window, undefined, peers, sync({ isolate: "a" }), T0);
    peers.set("a", a.peer);
    const b = grantLease(window, a.state, peers, sync({ isolate: "b" }), T0 + 100);
    expect(b.lease.peers).toBe(2);
    const later = grantLease(window, b.state, peers, sync({ isolate: "c" }), T0 + 100_000);
    expect(later.lease.peers).toBe(1);
  });
});
