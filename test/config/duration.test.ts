// Periods: every accepted spelling, every rejected one, and the exact round trip through formatDuration.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatDuration, parseDuration } from "../../src/config/duration";

function msOf(value: unknown): number {
  const parsed = parseDuration(value);
  if (!parsed.ok) throw new Error(`expected ${String(value)} to parse, got: ${parsed.problem}`);
  return parsed.ms;
}

function problemOf(value: unknown): string {
  const parsed = parseDuration(value);
  if (parsed.ok) throw new Error(`expected ${String(value)} to be rejected, got ${parsed.ms}ms`);
  return parsed.problem;
}

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["10s", 10_000],
    ["5m", 300_000],
    ["1h", 3_600_000],
    ["1d", 86_400_000],
    ["90s", 90_000],
  ])("reads %s as %i ms", (text, ms) => {
    expect(msOf(text)).toBe(ms);
  });

  it("reads a number as seconds", () => {
    expect(msOf(60)).toBe(60_000);
  });

  it("reads fractional seconds down to whole milliseconds", () => {
    expect(msOf(0.5)).toBe(500);
    expect(msOf(0.001)).toBe(1);
  });

  it("reads decimal seconds exactly even where multiplying by 1000 rounds", () => {
    expect(1.001 * 1000).not.toBe(1001);
    expect(msOf(1.001)).toBe(1001);
  });

  it("rejects seconds that are not a whole number of milliseconds", () => {
    expect(problemOf(0.0005)).toMatch(/0\.0005 seconds is not a whole number of milliseconds/);
    expect(problemOf(1.0005)).toMatch(/not a whole number of milliseconds/);
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])("rejects %d seconds", (seconds) => {
    expect(problemOf(seconds)).toMatch(/^expected a duration like "10s"/);
  });

  it("rejects a zero duration string", () => {
    expect(problemOf("0s")).toBe('a duration must be positive, got "0s"');
  });

  it("rejects text that is not a duration, quoting it", () => {
    const form = 'a duration like "10s" (a positive integer then ms, s, m, h or d) or a positive number of seconds';
    expect(problemOf("ten")).toBe(`expected ${form}, got "ten"`);
  });

  it.each(["1.5s", " 10s", "10s ", "-5s", "10 s", "1m30s", ""])("rejects %j", (text) => {
    expect(problemOf(text)).toMatch(/^expected a duration like "10s"/);
  });

  it("explains a number written as a string without a unit", () => {
    expect(problemOf("10")).toBe('"10" has no unit; write "10s", or the number 10 for seconds');
  });

  it.each(["10x", "10S", "10sec", "1w"])("names the unknown unit in %j", (text) => {
    expect(problemOf(text)).toMatch(/^unknown unit ".+" in ".+"; use ms, s, m, h or d/);
  });

  it("rejects durations too long to count in exact milliseconds", () => {
    expect(problemOf("999999999999d")).toMatch(/is too long; a duration can be at most 9007199254740991ms/);
    expect(problemOf(1e300)).toMatch(/is too long/);
  });

  it.each([null, undefined, true, [10], { seconds: 10 }])("rejects the non-duration %j", (value) => {
    expect(problemOf(value)).toMatch(/^expected a duration like "10s"/);
  });
});

describe("formatDuration", () => {
  it.each([
    [60_000, "1m"],
    [1_500, "1500ms"],
    [10_000, "10s"],
    [90_000, "90s"],
    [3_600_000, "1h"],
    [86_400_000, "1d"],
    [172_800_000, "2d"],
    [1, "1ms"],
  ])("writes %i ms as %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([0, -1, 1.5, Number.NaN, 2 ** 53])("refuses %d, which is not a positive whole number of ms", (ms) => {
    expect(() => formatDuration(ms)).toThrow(RangeError);
  });
});

describe("round trip", () => {
  const anyMs = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });

  it("parses every formatted duration back to the same milliseconds", () => {
    fc.assert(fc.property(anyMs, (ms) => msOf(formatDuration(ms)) === ms));
  });

  it("formats no longer than the plain millisecond form", () => {
    fc.assert(fc.property(anyMs, (ms) => formatDuration(ms).length <= `${ms}ms`.length));
  });

  it("reads any whole number of milliseconds written as seconds", () => {
    const upToCenturies = fc.integer({ min: 1, max: 10 ** 12 });
    fc.assert(fc.property(upToCenturies, (ms) => msOf(ms / 1000) === ms));
  });
});
