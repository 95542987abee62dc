import { describe, expect, it } from "vitest";
import { backoffMs, Breakers, MAX_BACKOFF_MS } from "../../src/strict/breaker";

const T0 = 1_700_000_000_000;

describe("circuit breakers for strict decisions", () => {
  it("lets calls through after a single failure: it may be a blip", () => {
    const breakers = new Breakers();
    breakers.failed("k", 100, T0);
    expect(breakers.waitFor("k", T0)).toBe(0);
  });

  it("opens for one timeout after two failures in a row, then lets the next call try", () => {
    const breakers = new Breakers();
    breakers.failed("k", 100, T0);
    breakers.failed("k", 100, T0 + 10);
    expect(breakers.waitFor("k", T0 + 10)).toBe(100);
    expect(breakers.waitFor("k", T0 + 109)).toBe(1);
    expect(breakers.waitFor("k", T0 + 110)).toBe(0);
  });

  it("stays open twice as long after each further failure, at most 30 s", () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(100, n))).toEqual([100, 200, 400, 800]);
    expect(backoffMs(1_000, 20)).toBe(MAX_BACKOFF_MS);
    const breakers = new Breakers();
    breakers.failed("k", 100, T0);
    breakers.failed("k", 100, T0);
    breakers.failed("k", 100, T0 + 100);
    expect(breakers.waitFor("k", T0 + 100)).toBe(200);
  });

  it("does not count failures of calls that were already waiting when it opened", () => {
    const breakers = new Breakers();
    for (let i = 0; i < 50; i++) breakers.failed("k", 100, T0);
    expect(breakers.waitFor("k", T0)).toBe(100);
  });

  it("closes when a call succeeds", () => {
    const breakers = new Breakers();
    breakers.failed("k", 100, T0);
    breakers.failed("k", 100, T0);
    breakers.succeeded("k");
    breakers.failed("k", 100, T0);
    expect(breakers.waitFor("k", T0)).toBe(0);
  });

  it("keeps each object's breaker apart", () => {
    const breakers = new Breakers();
    breakers.failed("a", 100, T0);
    breakers.failed("a", 100, T0);
    expect(breakers.waitFor("b", T0)).toBe(0);
  });

  it("tracks at most the objects it was sized for, starting over past them", () => {
    const breakers = new Breakers(2);
    for (const name of ["a", "b"]) {
      breakers.failed(name, 100, T0);
      breakers.failed(name, 100, T0);
    }
    breakers.failed("c", 100, T0);
    expect(breakers.waitFor("a", T0)).toBe(0);
  });
});
