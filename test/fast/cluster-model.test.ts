import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimiterState, Policy } from "../../src/algorithms";
import { grantLease, type Lease, type SyncRequest } from "../../src/fast/lease";
import { indexPeers } from "../../src/fast/peer-index";
import { applyLease, decideLocally, freshKey, fromLease, nextSync, refundLocally, syncFailed, type LocalKey, type Sender } from "../../src/fast/local";
import { syncDue } from "../../src/fast/sync-timing";
import { rule } from "../helpers/rules";

const T0 = 1_700_000_000_000;

/** How a sync goes: answered, lost before the object saw it, or applied there and the answer lost. */
type Fate = "ok" | "lost-before" | "lost-after";

/**
 * Several isolates and one object, wired with the real lease and local-key functions and nothing
 * else: every sync that reaches the object goes through grantLease, as the Durable Object runs it.
 */
class Cluster {
  private state: LimiterState | undefined;
  private readonly peers = indexPeers();
  readonly keys: LocalKey[];
  private readonly senders: Sender[];
  readonly admitted: { at: number; cost: number; isolate: number; givenBack?: boolean }[] = [];
  /** units given back, each at the time it was spent, in the order they came back */
  readonly givenBack: { at: number; cost: number; after: number }[] = [];

  constructor(
    private readonly policy: Policy,
    private readonly fastRule: ReturnType<typeof rule>,
    isolates: number,
  ) {
    this.keys = Array.from({ length: isolates }, () => freshKey(T0));
    this.senders = Array.from({ length: isolates }, (_, i) => {
      let seq = 0;
      return { isolate: `iso-${i}`, nextSeq: () => ++seq };
    });
  }

  request(isolate: number, cost: number, now: number, fate: Fate): void {
    const key = this.keys[isolate]!;
    let decision = decideLocally(key, this.fastRule, cost, now);
    if (!decision && this.sync(isolate, cost, now, fate)) decision = fromLease(key, this.fastRule, cost, now);
    if (decision?.allowed) this.admitted.push({ at: now, cost, isolate });
    if (syncDue(key, this.fastRule, now)) this.sync(isolate, 0, now, fate);
  }

  /** Gives back the isolate's last admission, as when another rule denied its request or `count` did not count it. */
  refund(isolate: number, now: number): void {
    const last = this.admitted.findLast((a) => a.isolate === isolate && !a.givenBack);
    if (!last) return;
    last.givenBack = true;
    refundLocally(this.keys[isolate]!, this.fastRule, last.cost, last.at, now);
    this.givenBack.push({ at: last.at, cost: last.cost, after: this.admitted.length });
    if (syncDue(this.keys[isolate]!, this.fastRule, now)) this.sync(isolate, 0, now, "ok");
  }

  /** One sync as the isolate's shell runs it; true when the answer arrived. */
  private sync(isolate: number, need: number, now: number, fate: Fate): boolean {
    const key = this.keys[isolate]!;
    const request: SyncRequest = nextSync(key, this.fastRule, this.senders[isolate]!, need, now);
    let lease: Lease | undefined;
    if (fate !== "lost-before") {
      const result = grantLease(this.policy, this.state, this.peers, request, now);
      this.state = result.state;
      lease = result.lease;
    }
    if (fate !== "ok" || !lease) {
      syncFailed(key, this.fastRule, now);
      return false;
    }
    applyLease(key, this.fastRule, lease, now);
    return true;
  }
}

describe("fast mode across isolates (model of the real functions)", () => {
  const scenario = fc.record({
    isolates: fc.integer({ min: 1, max: 6 }),
    limit: fc.integer({ min: 1, max: 40 }),
    periodMs: fc.integer({ min: 500, max: 5_000 }),
    buckets: fc.integer({ min: 1, max: 5 }),
    syncMs: fc.integer({ min: 20, max: 1_000 }),
    events: fc.array(
      fc.record({
        gap: fc.nat({ max: 120 }),
        isolate: fc.nat({ max: 5 }),
        cost: fc.integer({ min: 1, max: 3 }),
        fate: fc.constantFrom<Fate>("ok", "ok", "ok", "ok", "ok", "ok", "lost-before", "lost-after"),
      }),
      { minLength: 50, maxLength: 400, size: "max" },
    ),
  });

  it("never admits more than the limit in any fixed window, whatever syncs are lost or retried", () => {
    fc.assert(
      fc.property(scenario, ({ isolates, limit, periodMs, buckets, syncMs, events }) => {
        const policy: Policy = { algorithm: "sliding-window", limit, periodMs, burst: limit, buckets };
        const fastRule = rule({ mode: "fast", limit, periodMs, buckets, syncMs });
        const cluster = new Cluster(policy, fastRule, isolates);
        let now = T0;
        for (const e of events) {
          now += e.gap;
          cluster.request(e.isolate % isolates, e.cost, now, e.fate);
        }
        const perWindow = new Map<number, number>();
        for (const { at, cost } of cluster.admitted) {
          const w = Math.floor(at / periodMs);
          perWindow.set(w, (perWindow.get(w) ?? 0) + cost);
        }
        for (const total of perWindow.values()) expect(total).toBeLessThanOrEqual(limit);
      }),
      { numRuns: 300 },
    );
  }, 30_000);

  it("never admits a request past the limit of its fixed window, counting what was given back, whatever syncs are lost", () => {
    const refunding = fc.record({
      algorithm: fc.constantFrom("sliding-window" as const, "fixed-window" as const),
      limit: fc.integer({ min: 1, max: 20 }),
      periodMs: fc.integer({ min: 500, max: 5_000 }),
      syncMs: fc.integer({ min: 20, max: 1_000 }),
      isolates: fc.integer({ min: 1, max: 4 }),
      events: fc.array(fc.record({ gap: fc.nat({ max: 120 }), isolate: fc.nat({ max: 3 }), cost: fc.integer({ min: 1, max: 3 }), refund: fc.boolean(), fate: fc.constantFrom<Fate>("ok", "ok", "ok", "lost-before", "lost-after") }), { minLength: 50, maxLength: 400, size: "max" }),
    });
    fc.assert(
      fc.property(refunding, ({ algorithm, limit, periodMs, syncMs, isolates, events }) => {
        const policy: Policy = { algorithm, limit, periodMs, burst: limit, buckets: 1 };
        const cluster = new Cluster(policy, rule({ mode: "fast", algorithm, limit, periodMs, buckets: 1, syncMs }), isolates);
        let now = T0;
        for (const e of events) {
          now += e.gap;
          if (e.refund) cluster.refund(e.isolate % isolates, now);
          else cluster.request(e.isolate % isolates, e.cost, now, e.fate);
        }
        const window = (t: number) => Math.floor(t / periodMs);
        cluster.admitted.forEach(({ at }, i) => {
          const taken = cluster.admitted.slice(0, i + 1).filter((a) => window(a.at) === window(at)).reduce((sum, a) => sum + a.cost, 0);
          const back = cluster.givenBack.filter((b) => b.after <= i && window(b.at) === window(at)).reduce((sum, b) => sum + b.cost, 0);
          expect(taken - back).toBeLessThanOrEqual(limit);
        });
      }),
      { numRuns: 300 },
    );
  }, 30_000);

  // Leased tokens are taken when granted and may be spent up to a lease (one sync interval) later,
  // so a burst may carry that much refill on top of `burst`; the long-run rate is exact.
  it("never admits more than the token bucket allows plus one sync interval of refill, whatever syncs are lost", () => {
    fc.assert(
      fc.property(scenario, ({ isolates, limit, periodMs, syncMs, events }) => {
        const policy: Policy = { algorithm: "token-bucket", limit, periodMs, burst: limit, buckets: 1 };
        const fastRule = rule({ mode: "fast", algorithm: "token-bucket", limit, periodMs, syncMs });
        const cluster = new Cluster(policy, fastRule, isolates);
        let now = T0;
        for (const e of events) {
          now += e.gap;
          cluster.request(e.isolate % isolates, e.cost, now, e.fate);
        }
        const { admitted } = cluster;
        for (let i = 0; i < admitted.length; i++) {
          let taken = 0;
          for (let j = i; j < admitted.length; j++) {
            taken += admitted[j]!.cost;
            const allowance = limit + ((admitted[j]!.at - admitted[i]!.at + syncMs) * limit) / periodMs;
            if (taken > allowance) expect(taken).toBeLessThanOrEqual(allowance);
          }
        }
      }),
      { numRuns: 150 },
    );
  }, 30_000);
});
