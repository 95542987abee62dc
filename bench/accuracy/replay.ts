/**
 * Replays each source's requests through every estimator and an exact sliding log, in the two ways
 * of counting, and tallies where they disagree.
 *
 * - every attempt counted: every request counts, allowed or not, in the exact log and in the
 *   estimator alike (Cloudflare's analysis: both see the same stream). The exact decision is
 *   "at most `limit` requests in (t − period, t], this one included".
 * - only admitted requests counted: each limiter enforces with its own state (denied requests do
 *   not count), as a deployment would; the exact limiter is a sliding log of admitted requests.
 */
import type { Estimator } from "./limiters";
import { SOURCE_CLASSES, type SourceClass } from "./trace";

export type Mode = "every-attempt" | "admitted-only";
export const MODES: readonly Mode[] = ["every-attempt", "admitted-only"];

/** What one estimator got wrong in one mode, over every source replayed so far. */
export interface Tally {
  requests: number;
  /** decided differently from the exact log */
  wrong: number;
  /** allowed, the exact log denied */
  wrongAllowed: number;
  /** denied, the exact log allowed */
  wrongDenied: number;
  /** Σ |estimate − exact| / (exact + 1), the rate each request sees, itself included */
  relErrorSum: number;
  /** sources this estimator denied at least once though the exact log never denied them */
  falsePositiveSources: number;
  /** sources the exact log denied at least once that this estimator never denied */
  falseNegativeSources: number;
  /** every attempt: the largest exact rate (÷ limit) among requests wrongly allowed; 0 when none */
  worstOvershoot: number;
  /** admitted only: the most admitted for one source in any interval of one period */
  maxAdmittedInPeriod: number;
  /** admitted only: admissions that took the source past the limit in the period ending at them */
  overAdmitted: number;
  /** admitted only: sources that were ever admitted past the limit in some period */
  overAdmittedSources: number;
  /** requests, wrong decisions and Σ relative error per source class, in SOURCE_CLASSES order */
  byClass: { requests: number; wrong: number; relErrorSum: number }[];
}

function emptyTally(): Tally {
  return {
    requests: 0,
    wrong: 0,
    wrongAllowed: 0,
    wrongDenied: 0,
    relErrorSum: 0,
    falsePositiveSources: 0,
    falseNegativeSources: 0,
    worstOvershoot: 0,
    maxAdmittedInPeriod: 0,
    overAdmitted: 0,
    overAdmittedSources: 0,
    byClass: SOURCE_CLASSES.map(() => ({ requests: 0, wrong: 0, relErrorSum: 0 })),
  };
}

/** One source's decisions (1 = allowed) and the estimates they were made from, in request order. */
export interface Kept {
  allowed: Uint8Array;
  used: Float64Array;
}

/** The trace itself, as the exact log sees it. */
export interface TraceTally {
  sources: number;
  requests: number;
  /** every attempt counted: requests over the limit (the exact log denies them) */
  overLimitRequests: number;
  /** sources with at least one request over the limit */
  overLimitSources: number;
  /** admitted only: requests the exact sliding-log limiter denies */
  exactDenied: number;
  byClass: { sources: number; requests: number; overLimitRequests: number; overLimitSources: number }[];
  /** the source with the most requests */
  busiestSource: number;
}

export class Replayer {
  readonly tallies: Map<Estimator, Record<Mode, Tally>>;
  readonly trace: TraceTally = {
    sources: 0,
    requests: 0,
    overLimitRequests: 0,
    overLimitSources: 0,
    exactDenied: 0,
    byClass: SOURCE_CLASSES.map(() => ({ sources: 0, requests: 0, overLimitRequests: 0, overLimitSources: 0 })),
    busiestSource: 0,
  };
  private before = new Int32Array(1 << 16);
  private exactEvery = new Uint8Array(1 << 16);
  private exactAdmitted = new Uint8Array(1 << 16);
  private admitted = new Float64Array(1 << 16);
  /** the last source's decisions and estimates per estimator and mode, for verify.ts */
  readonly lastDecisions = new Map<Estimator, Record<Mode, Kept>>();

  constructor(
    readonly estimators: readonly Estimator[],
    private readonly limit: number,
    private readonly periodMs: number,
  ) {
    this.tallies = new Map(estimators.map((e) => [e, { "every-attempt": emptyTally(), "admitted-only": emptyTally() }]));
  }

  /** Replays one source's sorted request times; `keep` keeps its decisions in {@link lastDecisions}. */
  replay(times: Float64Array, cls: SourceClass, keep = false): void {
    const n = times.length;
    if (n === 0) return;
    this.ensure(n);
    const { limit: L, periodMs: P, before, exactEvery, exactAdmitted, admitted } = this;
    const c = SOURCE_CLASSES.indexOf(cls);

    // Exact, every attempt counted: requests in (t − P, t] before this one, by two pointers.
    let overLimit = 0;
    for (let i = 0, j = 0; i < n; i++) {
      const t = times[i]!;
      while (times[j]! <= t - P) j++;
      before[i] = i - j;
      exactEvery[i] = i - j + 1 <= L ? 1 : 0;
      if (!exactEvery[i]) overLimit++;
    }
    // Exact, admitted only: a sliding log of admitted requests.
    let exactDenied = 0;
    for (let i = 0, head = 0, len = 0; i < n; i++) {
      const t = times[i]!;
      while (head < len && admitted[head]! <= t - P) head++;
      exactAdmitted[i] = len - head + 1 <= L ? 1 : 0;
      if (exactAdmitted[i]) admitted[len++] = t;
      else exactDenied++;
    }
    const trace = this.trace;
    trace.sources++;
    trace.requests += n;
    trace.overLimitRequests += overLimit;
    trace.exactDenied += exactDenied;
    if (overLimit > 0) trace.overLimitSources++;
    if (n > trace.busiestSource) trace.busiestSource = n;
    const traceClass = trace.byClass[c]!;
    traceClass.sources++;
    traceClass.requests += n;
    traceClass.overLimitRequests += overLimit;
    if (overLimit > 0) traceClass.overLimitSources++;

    for (const estimator of this.estimators) {
      const tallies = this.tallies.get(estimator)!;
      const kept = keep ? this.decisionsFor(estimator, n) : undefined;
      this.everyAttempt(estimator, times, tallies["every-attempt"], c, overLimit > 0, kept?.["every-attempt"]);
      this.admittedOnly(estimator, times, tallies["admitted-only"], c, exactDenied > 0, kept?.["admitted-only"]);
    }
  }

  private everyAttempt(e: Estimator, times: Float64Array, tally: Tally, c: number, exactLimited: boolean, kept?: Kept) {
    const { limit: L, before, exactEvery } = this;
    const n = times.length;
    const { scale } = e;
    const budget = L * scale;
    let wrongAllowed = 0;
    let wrongDenied = 0;
    let relErrorSum = 0;
    let denied = 0;
    let worst = 0;
    e.reset();
    for (let i = 0; i < n; i++) {
      const t = times[i]!;
      const used = e.used(t);
      const allowed = used + scale <= budget;
      e.add(t);
      if (kept) {
        kept.allowed[i] = allowed ? 1 : 0;
        kept.used[i] = used;
      }
      const exact = before[i]!;
      relErrorSum += Math.abs(used / scale - exact) / (exact + 1);
      if (!allowed) denied++;
      if (allowed !== (exactEvery[i] === 1)) {
        if (allowed) {
          wrongAllowed++;
          if (exact + 1 > worst) worst = exact + 1;
        } else {
          wrongDenied++;
        }
      }
    }
    add(tally, c, n, { wrongAllowed, wrongDenied, relErrorSum: e.estimatesWindow ? relErrorSum : 0, denied, exactLimited });
    if (worst > 0) tally.worstOvershoot = Math.max(tally.worstOvershoot, worst / L - 1);
  }

  private admittedOnly(e: Estimator, times: Float64Array, tally: Tally, c: number, exactLimited: boolean, kept?: Kept) {
    const { limit: L, periodMs: P, exactAdmitted, admitted } = this;
    const n = times.length;
    const { scale } = e;
    const budget = L * scale;
    let wrongAllowed = 0;
    let wrongDenied = 0;
    let relErrorSum = 0;
    let denied = 0;
    let most = 0;
    let over = 0;
    e.reset();
    for (let i = 0, head = 0, len = 0; i < n; i++) {
      const t = times[i]!;
      const used = e.used(t);
      const allowed = used + scale <= budget;
      if (kept) {
        kept.allowed[i] = allowed ? 1 : 0;
        kept.used[i] = used;
      }
      // What this limiter itself admitted in (t − P, t], exactly.
      while (head < len && admitted[head]! <= t - P) head++;
      const own = len - head;
      relErrorSum += Math.abs(used / scale - own) / (own + 1);
      if (allowed) {
        e.add(t);
        admitted[len++] = t;
        if (own + 1 > most) most = own + 1;
        if (own + 1 > L) over++;
      } else {
        denied++;
      }
      if (allowed !== (exactAdmitted[i] === 1)) {
        if (allowed) wrongAllowed++;
        else wrongDenied++;
      }
    }
    add(tally, c, n, { wrongAllowed, wrongDenied, relErrorSum: e.estimatesWindow ? relErrorSum : 0, denied, exactLimited });
    tally.maxAdmittedInPeriod = Math.max(tally.maxAdmittedInPeriod, most);
    tally.overAdmitted += over;
    if (over > 0) tally.overAdmittedSources++;
  }

  private decisionsFor(e: Estimator, n: number): Record<Mode, Kept> {
    let kept = this.lastDecisions.get(e);
    if (!kept || kept["every-attempt"].allowed.length < n) {
      const make = (): Kept => ({ allowed: new Uint8Array(n * 2), used: new Float64Array(n * 2) });
      kept = { "every-attempt": make(), "admitted-only": make() };
      this.lastDecisions.set(e, kept);
    }
    return kept;
  }

  private ensure(n: number): void {
    if (this.before.length >= n) return;
    const size = 1 << Math.ceil(Math.log2(n));
    this.before = new Int32Array(size);
    this.exactEvery = new Uint8Array(size);
    this.exactAdmitted = new Uint8Array(size);
    this.admitted = new Float64Array(size);
  }
}

/** What one source's replay adds to a tally: its requests, its wrong decisions, and whether the source was wrongly limited or let through. */
function add(
  tally: Tally,
  c: number,
  n: number,
  source: { wrongAllowed: number; wrongDenied: number; relErrorSum: number; denied: number; exactLimited: boolean },
): void {
  const { wrongAllowed, wrongDenied, relErrorSum, denied, exactLimited } = source;
  tally.requests += n;
  tally.wrongAllowed += wrongAllowed;
  tally.wrongDenied += wrongDenied;
  tally.wrong += wrongAllowed + wrongDenied;
  tally.relErrorSum += relErrorSum;
  const byClass = tally.byClass[c]!;
  byClass.requests += n;
  byClass.wrong += wrongAllowed + wrongDenied;
  byClass.relErrorSum += relErrorSum;
  if (denied > 0 && !exactLimited) tally.falsePositiveSources++;
  if (denied === 0 && exactLimited) tally.falseNegativeSources++;
}

/** The times a limiter admits from `times` when denied requests do not count (for the boundary chart). */
export function admittedTimes(e: Estimator | "exact", times: Float64Array, limit: number, periodMs: number): number[] {
  const out: number[] = [];
  if (e === "exact") {
    let head = 0;
    for (const t of times) {
      while (head < out.length && out[head]! <= t - periodMs) head++;
      if (out.length - head + 1 <= limit) out.push(t);
    }
    return out;
  }
  e.reset();
  for (const t of times) {
    if (e.used(t) + e.scale <= limit * e.scale) {
      e.add(t);
      out.push(t);
    }
  }
  return out;
}
