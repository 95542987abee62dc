// The idealized bounds the simulation report sets beside its missed targets: what a per-isolate lease must hold, and cost, to keep requests from waiting.
import { describe, expect, it } from "vitest";
import { leaseBound, longestCycle, reorderBound, reorderPolicy, shortfall } from "../../bench/simulation/bound";

describe("the lease bound", () => {
  it("counts what a Poisson demand asks beyond a lease", () => {
    // Poisson(1): P(2) = e⁻¹/2, P(3) = e⁻¹/6, ...; E[(X − 1)⁺] = E[X] − 1 + P(0) = e⁻¹.
    expect(shortfall(1, 1)).toBeCloseTo(Math.exp(-1), 10);
    expect(shortfall(2, 0)).toBeCloseTo(2, 10);
  });

  it("counts a large mean's shortfall as a normal count would, where e^−mean underflows", () => {
    // Poisson(5,000) is close to normal with σ ≈ 70.7: E[(X − μ)⁺] = σ/√(2π) ≈ 28.2.
    expect(shortfall(5_000, 5_000)).toBeCloseTo(70.71 / Math.sqrt(2 * Math.PI), 0);
    // 1 % of 5,000 is 50 units short: a little under the mean, where the shortfall is σ/√(2π) + (μ − lease).
    const { lease } = leaseBound(1, 5_000, 300_000, 1_000);
    expect(shortfall(5_000, lease)).toBeLessThanOrEqual(50);
    expect(shortfall(5_000, lease - 1)).toBeGreaterThan(50);
  });

  it("finds the smallest lease that leaves at most 1 % of a cycle's requests waiting", () => {
    // 512 isolates sharing 500 a second, refilled every second: about one request a cycle each.
    const bound = leaseBound(512, 500, 30_000, 1_000);
    expect(shortfall(500 / 512, bound.lease)).toBeLessThanOrEqual(0.01 * (500 / 512));
    expect(shortfall(500 / 512, bound.lease - 1)).toBeGreaterThan(0.01 * (500 / 512));
    expect(bound.lease).toBe(4);
    expect(bound.underAdmission).toBeCloseTo((512 * (4 - 500 / 512 / 2)) / 30_000, 10);
    expect(bound.syncsPerSecond).toBe(512);
  });

  it("needs 512 isolates at a key held at its limit to call more than once a request to keep both 1 % waiting and 5 % under-admission", () => {
    const bound = longestCycle(512, 500, 30_000, 0.05)!;
    expect(bound.underAdmission).toBeLessThanOrEqual(0.05);
    expect(bound.cycleMs).toBeLessThan(1_000);
    expect(bound.syncsPerRequest).toBeGreaterThan(1);
  });

  it("finds no cycle at all for 4,096 isolates sharing the same 500 a second", () => {
    expect(longestCycle(4_096, 500, 30_000, 0.05)).toBeUndefined();
  });
});

describe("the reorder-point bound", () => {
  it("makes a request wait whenever it comes within the lead time of an isolate that asks for one unit as it spends its last", () => {
    // Reorder point 0, refill 1: it holds its one unit until a request takes it, and then none for the lead time.
    const { waited, held } = reorderPolicy(0.2, 0, 1);
    expect(waited).toBeCloseTo(1 - Math.exp(-0.2), 10);
    expect(held).toBeCloseTo(Math.exp(-0.2), 10);
  });

  it("averages over the positions a refill cycles through", () => {
    // Reorder point 1, refill 2: it holds 2 or 3 when it asks, each half the time.
    const m = 0.5;
    const p = (k: number) => (Math.exp(-m) * m ** k) / [1, 1, 2, 6][k]!;
    const { waited, held } = reorderPolicy(m, 1, 2);
    expect(waited).toBeCloseTo((1 - p(0) - p(1) + (1 - p(0) - p(1) - p(2))) / 2, 10);
    expect(held).toBeCloseTo((2 * p(0) + p(1) + (3 * p(0) + 2 * p(1) + p(2))) / 2, 10);
  });

  it("keeps the calls within the budget: a refill of three units for 500 requests a second and 200 calls", () => {
    const bound = reorderBound(512, 500, 30_000, 200, 300_000);
    expect(bound.refill).toBe(3);
    expect(bound.callsPerSecond).toBeCloseTo(500 / 3, 10);
  });

  it("meets both 1× targets at 512 isolates, isolates vanishing included, for an object that always has units to give", () => {
    const bound = reorderBound(512, 500, 30_000, 200, 300_000);
    expect(bound.waited).toBeLessThanOrEqual(0.01);
    expect(bound.underAdmission + bound.vanished).toBeLessThanOrEqual(0.05);
    expect(bound.reorder).toEqual([0, 1]);
  });

  it("cannot keep under-admission within 5 % at 4,096 isolates, whose every unit held is idle for seconds", () => {
    expect(reorderBound(4_096, 500, 30_000, 200, 300_000).underAdmission).toBeGreaterThan(0.05);
  });
});
