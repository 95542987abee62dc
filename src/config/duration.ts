/** Turns a rule's durations (`period`, `slotTtl`, `timeout`, `block`, `sync`, `warmup`) into whole milliseconds and back, exactly. */
import { show } from "./errors";

/** Smallest first: formatDuration keeps the last unit that divides, which gives the shortest form. */
const UNIT_MS = new Map([
  ["ms", 1],
  ["s", 1_000],
  ["m", 60_000],
  ["h", 3_600_000],
  ["d", 86_400_000],
]);

const HINT = `a duration like "10s" (a positive integer then ms, s, m, h or d) or a positive number of seconds`;

export type ParsedDuration = { ok: true; ms: number } | { ok: false; problem: string };

/**
 * Reads a duration: a positive number of seconds (fractions down to whole milliseconds),
 * or `<positive integer><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
 *
 * @example
 * parseDuration("5m"); // { ok: true, ms: 300000 }
 * parseDuration(0.5);  // { ok: true, ms: 500 }
 * parseDuration("ten"); // { ok: false, problem: 'expected a duration like "10s" (…), got "ten"' }
 */
export function parseDuration(value: unknown): ParsedDuration {
  if (typeof value === "number") return fromSeconds(value);
  if (typeof value === "string") return fromText(value);
  return invalid(`expected ${HINT}, got ${show(value)}`);
}

/**
 * The shortest exact form of a duration, for display: the largest unit that divides it.
 *
 * @example
 * formatDuration(60_000); // "1m"
 * formatDuration(1_500);  // "1500ms"
 */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new RangeError(`formatDuration needs a positive whole number of milliseconds, got ${ms}`);
  }
  let shortest = `${ms}ms`;
  for (const [unit, size] of UNIT_MS) if (ms % size === 0) shortest = `${ms / size}${unit}`;
  return shortest;
}

function fromSeconds(seconds: number): ParsedDuration {
  if (!(seconds > 0) || !Number.isFinite(seconds)) return invalid(`expected ${HINT}, got ${show(seconds)}`);
  const ms = Math.round(seconds * 1000);
  if (!Number.isSafeInteger(ms)) return tooLong(seconds);
  // Compare against the number as written: 1.001 * 1000 is 1000.9999999999999 in floating point.
  if (ms / 1000 !== seconds) {
    const fix = `use at most 3 decimals, e.g. 0.25 or "250ms"`;
    return invalid(`${seconds} seconds is not a whole number of milliseconds; ${fix}`);
  }
  return { ok: true, ms };
}

function fromText(text: string): ParsedDuration {
  const match = /^(\d+)([a-z]*)$/i.exec(text);
  if (match === null) return invalid(`expected ${HINT}, got ${show(text)}`);
  const [, digits = "", unit = ""] = match;
  const size = UNIT_MS.get(unit);
  if (unit === "") return invalid(`${show(text)} has no unit; write "${digits}s", or the number ${digits} for seconds`);
  if (size === undefined) return invalid(`unknown unit "${unit}" in ${show(text)}; use ms, s, m, h or d, e.g. "10s"`);
  const ms = Number(digits) * size;
  if (ms === 0) return invalid(`a duration must be positive, got ${show(text)}`);
  if (!Number.isSafeInteger(ms)) return tooLong(text);
  return { ok: true, ms };
}

function tooLong(value: number | string): ParsedDuration {
  return invalid(`${show(value)} is too long; a duration can be at most ${Number.MAX_SAFE_INTEGER}ms`);
}

function invalid(problem: string): ParsedDuration {
  return { ok: false, problem };
}
