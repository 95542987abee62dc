// onError "local" as arithmetic: an isolate's share of a key, from what its object last said.
import { describe, expect, it } from "vitest";
import type { Policy } from "../../src/algorithms";
import { ALONE, decideShare, type Counters, type Share } from "../../src/limiter/local-share";

const T0 = 1_700_000_040_000;
const window: Policy = { algorithm: "sliding-window", limit: 100, periodMs: 60_000, burst: 100, buckets: 60 };
const bucket: Policy = { algorithm: "token-bucket", limit: 100, periodMs: 60_000, burst: 100, buckets: 1 };

/** Admissions of `n` one-unit requests at `now`, carrying the counters along. */
function admitted(policy: Policy, known: Share, n: number, now: number, start?: Counters): { count: number; counters: Counters | undefined } {
  let counters = start;
  let count = 0;
  for (let i = 0; i < n; i++) {
    const outcome = decideShare(policy, counters, 1, known, now);
    if (!outcome) continue;
    counters = outcome.counters;
    if (outcome.decision.allowed) count++;
  }
  return { count, counters };
}

describe("decideShare", () => {
  it("gives a strict key, which knows no other isolate, the whole limit", () => {
    expect(admitted(window, ALONE, 150, T0).count).toBe(100);
  });

  it("divides the limit among the isolates the object reported", () => {
    expect(admitted(window, { peers: 4, free: Infinity, heardAt: T0 - 1 }, 50, T0).count).toBe(25);
  });

  it("reads a GCRA's free units out of its burst and one, not its limit: neither a period's wait nor more than its tolerance", () => {
    const smooth: Policy = { algorithm: "gcra", limit: 60, periodMs: 60_000, burst: 0, buckets: 1 };
    expect(admitted(smooth, { peers: 1, free: 0, heardAt: T0 - 1 }, 5, T0).count).toBe(0);
    expect(admitted(smooth, { peers: 1, free: 0, heardAt: T0 - 1 }, 5, T0 + 1_000, admitted(smooth, { peers: 1, free: 0, heardAt: T0 - 1 }, 1, T0).counters).count).toBe(1);
    const tolerant: Policy = { algorithm: "gcra", limit: 10, periodMs: 3_600_000, burst: 20, buckets: 1 };
    expect(admitted(tolerant, { peers: 1, free: 6, heardAt: T0 - 1 }, 25, T0).count).toBe(6);
  });

  it("has no share to give when no isolate is known: a rule none of whose objects has answered", () => {
    expect(decideShare(window, undefined, 1, { peers: 0, free: Infinity, heardAt: -Infinity }, T0)).toBeUndefined();
  });

  it("starts from its share of what the object last said was free, not a whole share", () => {
    expect(admitted(window, { peers: 4, free: 20, heardAt: T0 - 1 }, 50, T0).count).toBe(5);
    expect(admitted(bucket, { peers: 4, free: 0, heardAt: T0 - 1 }, 50, T0).count).toBe(0);
  });

  it("lets the units a fast key's last answer counted leave with the period they were counted in", () => {
    // Saturated two minutes ago, then the object went quiet: a period on, the key is free again.
    expect(admitted(window, { peers: 1, free: 0, heardAt: T0 - 120_000 }, 150, T0).count).toBe(100);
  });

  it("refills a token bucket's share at the share of its rate", () => {
    const drained = admitted(bucket, { peers: 4, free: 0, heardAt: T0 - 1 }, 1, T0);
    // 100 a minute over 4 isolates: one unit every 2.4 s each.
    expect(admitted(bucket, { peers: 4, free: 0, heardAt: T0 - 1 }, 5, T0 + 12_000, drained.counters).count).toBe(5);
  });

  it("keeps counting from its own counters while the object stays silent", () => {
    const known = { peers: 4, free: 100, heardAt: T0 - 1 };
    const first = admitted(window, known, 20, T0);
    expect(admitted(window, known, 20, T0 + 1_000, first.counters).count).toBe(5);
  });

  it("starts afresh from the object's newer answer, which counts what the counters admitted", () => {
    const first = admitted(window, { peers: 4, free: 100, heardAt: T0 - 1 }, 25, T0);
    expect(admitted(window, { peers: 4, free: 40, heardAt: T0 + 500 }, 20, T0 + 1_000, first.counters).count).toBe(10);
  });

  describe("for a strict key, whose object's answers leave out what the isolate admitted on its own", () => {
    const heard = (free: number, heardAt: number): Share => ({ peers: 1, free, heardAt, apart: true });

    it("starts from the units the object's last answer left", () => {
      expect(admitted(window, heard(20, T0 - 1), 50, T0).count).toBe(20);
    });

    it("lets an answer's units leave with the period they were counted in", () => {
      expect(admitted(window, heard(0, T0 - 120_000), 150, T0).count).toBe(100);
    });

    it("keeps its own count when the object's newer answer says less is used", () => {
      const first = admitted(window, heard(50, T0 - 1), 60, T0);
      expect(admitted(window, heard(30, T0 + 500), 40, T0 + 1_000, first.counters).count).toBe(0);
    });

    it("takes the object's newer answer when it says more is used", () => {
      const first = admitted(window, heard(100, T0 - 1), 10, T0);
      expect(admitted(window, heard(20, T0 + 500), 40, T0 + 1_000, first.counters).count).toBe(20);
    });
  });
});
