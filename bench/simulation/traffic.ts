/** Traffic: when requests arrive (steady or a flash crowd), which isolate takes each (even or skewed), and which key it is for. */
import { mix32, type Random } from "../lib/random";

/** The offered rate over time: constant, or a flash crowd that climbs from a base rate to a peak, holds, and falls back. */
export type Shape =
  | { kind: "steady"; perSecond: number }
  | { kind: "flash"; basePerSecond: number; peakPerSecond: number; startMs: number; rampMs: number; holdMs: number };

/** A piece of the rate: `perSecond` until `untilMs` after the start. */
interface Segment {
  untilMs: number;
  perSecond: number;
}

/** A ramp is cut into this many steps of constant rate. */
const RAMP_STEPS = 10;

function segmentsOf(shape: Shape): Segment[] {
  if (shape.kind === "steady") return [{ untilMs: Infinity, perSecond: shape.perSecond }];
  const { basePerSecond: base, peakPerSecond: peak, startMs, rampMs, holdMs } = shape;
  const out: Segment[] = [{ untilMs: startMs, perSecond: base }];
  for (let i = 1; i <= RAMP_STEPS; i++) out.push({ untilMs: startMs + (rampMs * i) / RAMP_STEPS, perSecond: base + ((peak - base) * i) / RAMP_STEPS });
  out.push({ untilMs: startMs + rampMs + holdMs, perSecond: peak });
  out.push({ untilMs: Infinity, perSecond: base });
  return out;
}

/** The offered rate at `ms` after the start. */
export function rateAt(shape: Shape, ms: number): number {
  return segmentsOf(shape).find((s) => ms < s.untilMs)!.perSecond;
}

/** Mean offered rate over [0, durationMs). */
export function meanRate(shape: Shape, durationMs: number): number {
  let from = 0;
  let total = 0;
  for (const s of segmentsOf(shape)) {
    const to = Math.min(s.untilMs, durationMs);
    if (to > from) total += (s.perSecond * (to - from)) / 1000;
    from = Math.max(from, to);
    if (from >= durationMs) break;
  }
  return (total * 1000) / durationMs;
}

/**
 * Poisson arrivals at a piecewise-constant rate: exponential gaps, redrawn from a segment's end
 * when one crosses it (the process is memoryless, so this is exact).
 */
export class Arrivals {
  private readonly segments: Segment[];
  private segment = 0;

  constructor(
    shape: Shape,
    private readonly start: number,
    private readonly random: Random,
  ) {
    this.segments = segmentsOf(shape);
  }

  /** The first arrival after `t` (absolute ms). */
  after(t: number): number {
    let at = t;
    for (;;) {
      const s = this.segments[this.segment]!;
      const end = this.start + s.untilMs;
      if (s.perSecond <= 0) {
        if (end === Infinity) return Infinity;
        at = Math.max(at, end);
        this.segment++;
        continue;
      }
      const next = at + this.random.exponential(1000 / s.perSecond);
      if (next < end) return next;
      at = end;
      this.segment++;
    }
  }
}

/** Picks from `n` items with weights ∝ 1/(rank+1)^s: Zipf's law over isolates or keys. s = 0 is uniform. */
export class Zipf {
  private readonly cumulative: Float64Array | null;
  private readonly total: number;

  constructor(
    readonly n: number,
    readonly s: number,
  ) {
    if (s === 0) {
      this.cumulative = null;
      this.total = n;
      return;
    }
    this.cumulative = new Float64Array(n);
    let total = 0;
    for (let k = 0; k < n; k++) this.cumulative[k] = total += 1 / Math.pow(k + 1, s);
    this.total = total;
  }

  /** The share of draws that land on rank `k`. */
  share(k: number): number {
    if (!this.cumulative) return 1 / this.n;
    return 1 / Math.pow(k + 1, this.s) / this.total;
  }

  pick(random: Random): number {
    const u = random.next() * this.total;
    if (!this.cumulative) return Math.min(this.n - 1, Math.floor(u));
    const c = this.cumulative;
    let lo = 0;
    let hi = this.n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (c[mid]! <= u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * The isolates a per-client key's traffic lands on: a client sits in one place, so its requests
 * reach one colo, where they are spread over a few isolates. Here: `homes` isolates chosen from the
 * key's name, each request going to one of them at random.
 */
export function homeOf(key: number, isolates: number, homes: number, random: Random): number {
  const which = homes <= 1 ? 0 : Math.floor(random.next() * homes);
  return mix32(key, which) % isolates;
}
