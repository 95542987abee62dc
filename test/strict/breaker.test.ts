import { describe, expect, it } from "vitest";
import { backoffMs, Breakers, MAX_BACKOFF_MS, RuleBreaker } from "../../src/strict/breaker";

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

  it("opens at once for an overloaded object, for one timeout, then twice as long", () => {
    const breakers = new Breakers();
    breakers.overloaded("k", 100, T0);
    expect(breakers.waitFor("k", T0)).toBe(100);
    breakers.overloaded("k", 100, T0 + 100);
    expect(breakers.waitFor("k", T0 + 100)).toBe(200);
  });

  it("does not count failures of calls that were already waiting when it opened", () => {
    const breakers = new Breakers();
    for (let i = 0; i < 50; i++) breakers.failed("k", 100, T0);
    expect(breakers.waitFor("k", T0)).toBe(100);
  });

  it("counts the failures of one call, which every request of its batch shares, once", () => {
    const breakers = new Breakers();
    const blip = new Error("the object moved");
    for (let i = 0; i < 5; i++) breakers.failed("k", 100, T0, blip);
    expect(breakers.waitFor("k", T0)).toBe(0);
    breakers.failed("k", 100, T0 + 10, new Error("again"));
    expect(breakers.waitFor("k", T0 + 10)).toBe(100);
  });

  it("closes when a call succeeds", () => {
    const breakers = new Breakers();
    breakers.failed("k", 100, T0);
    breakers.failed("k", 100, T0);
    breakers.succeeded("k", T0);
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

describe("a rule's breaker over all its keys", () => {
  const failKeys = (breaker: RuleBreaker, names: string[], now: number) => names.forEach((name) => breaker.failed(name, 100, now));

  it("leaves every key of the rule alone once four different keys failed in a row", () => {
    const breaker = new RuleBreaker("r");
    failKeys(breaker, ["a", "b", "c"], T0);
    expect(breaker.waitFor(T0)).toBe(0);
    breaker.failed("d", 100, T0);
    expect(breaker.waitFor(T0)).toBe(100);
  });

  it("counts a key once, however often it fails", () => {
    const breaker = new RuleBreaker("r");
    failKeys(breaker, ["a", "a", "b", "b", "c", "c"], T0);
    expect(breaker.waitFor(T0)).toBe(0);
  });

  it("stays closed while calls for the rule still succeed between failures", () => {
    const breaker = new RuleBreaker("r");
    failKeys(breaker, ["a", "b", "c"], T0);
    breaker.succeeded(T0);
    failKeys(breaker, ["d", "e", "f"], T0);
    expect(breaker.waitFor(T0)).toBe(0);
  });

  it("reopens for twice as long when the first call after it fails", () => {
    const breaker = new RuleBreaker("r");
    failKeys(breaker, ["a", "b", "c", "d"], T0);
    breaker.failed("e", 100, T0 + 50);
    expect(breaker.waitFor(T0 + 50)).toBe(50);
    breaker.failed("e", 100, T0 + 100);
    expect(breaker.waitFor(T0 + 100)).toBe(200);
  });

  it("closes at the first success for any key", () => {
    const breaker = new RuleBreaker("r");
    failKeys(breaker, ["a", "b", "c", "d"], T0);
    breaker.succeeded(T0);
    expect(breaker.waitFor(T0)).toBe(0);
    breaker.failed("a", 100, T0);
    expect(breaker.waitFor(T0)).toBe(0);
  });
});
