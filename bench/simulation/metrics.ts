/** What a run measures, per key and in all: admissions against the limit and against an exact limiter, waits, errors, and per-second series. */
import { decide, type LimiterState, type Policy } from "../../src/algorithms";
import { WAIT_CAUSES, type Outcome, type WaitCause } from "./isolate";
import type { CallKind } from "./object";

/**
 * One key's admissions. The exact limiter is floodgate's own algorithm deciding every request of
 * the same traffic at its arrival, in one place, with no delay: what strict mode would admit if a
 * call cost nothing. Token-bucket excess is read over every interval between two admissions, in one
 * pass: the most admitted in [t_i, t_j] beyond burst + rate·(t_j − t_i).
 */
export class KeyAccount {
  requests = 0;
  admitted = 0;
  exactAdmitted = 0;
  private exactState: LimiterState | undefined;
  private window = Number.NaN;
  private inWindow = 0;
  maxInWindow = 0;
  private cumulative = 0;
  private minTerm = Infinity;
  maxExcess = 0;
  /** admission times, kept only when asked (one hot key), for the busiest sliding period */
  readonly times: number[] | null;

  constructor(
    private readonly policy: Policy,
    private readonly start: number,
    keepTimes: boolean,
  ) {
    this.times = keepTimes ? [] : null;
  }

  arrived(now: number, cost: number): void {
    this.requests++;
    const exact = decide(this.policy, this.exactState, cost, now);
    this.exactState = exact.state;
    if (exact.decision.allowed) this.exactAdmitted += cost;
  }

  admit(now: number, cost: number): void {
    this.admitted += cost;
    const window = Math.floor((now - this.start) / this.policy.periodMs);
    if (window !== this.window) {
      this.window = window;
      this.inWindow = 0;
    }
    this.inWindow += cost;
    if (this.inWindow > this.maxInWindow) this.maxInWindow = this.inWindow;
    const rate = this.policy.limit / this.policy.periodMs;
    this.minTerm = Math.min(this.minTerm, this.cumulative - rate * now);
    this.cumulative += cost;
    const excess = this.cumulative - rate * now - this.minTerm - this.policy.burst;
    if (excess > this.maxExcess) this.maxExcess = excess;
    this.times?.push(now);
  }

  /** The most admitted in any span of one period (not only the fixed windows), from the kept times. */
  maxInAnyPeriod(): number {
    const t = this.times;
    if (!t) return Number.NaN;
    let best = 0;
    let i = 0;
    for (let j = 0; j < t.length; j++) {
      while (t[j]! - t[i]! >= this.policy.periodMs) i++;
      best = Math.max(best, j - i + 1);
    }
    return best;
  }
}

export type ErrorKind = NonNullable<Outcome["error"]>;

/** The whole run's counters, and per-second series for the charts. */
export class RunTotals {
  requests = 0;
  admitted = 0;
  /** requests the steady-state figures count: those arriving after the warm-up */
  steadyRequests = 0;
  steadyWaited = 0;
  /** how long each of those waited, ms: from its arrival to its decision */
  readonly steadyWaits: number[] = [];
  /** those of them that waited in fast mode, by why (see WaitCause) */
  readonly steadyWaitCauses = Object.fromEntries(WAIT_CAUSES.map((c) => [c, 0])) as Record<WaitCause, number>;
  steadyErrors = 0;
  waited = 0;
  lost = 0;
  /** admitted by the onError policy rather than by a lease or the object */
  admittedOnError = 0;
  readonly errors: Record<ErrorKind, number> = { timeout: 0, overloaded: 0, unavailable: 0, queueFull: 0, reset: 0 };
  /** fast syncs by why they were made (see CallKind) */
  readonly callKinds: Record<CallKind, number> = { first: 0, waiting: 0, background: 0, release: 0 };
  /** per second since the start: requests offered, admitted, object calls (all keys) */
  readonly offeredPerSecond: number[] = [];
  readonly admittedPerSecond: number[] = [];
  readonly callsPerSecond: number[] = [];

  constructor(
    private readonly start: number,
    private readonly warmupMs: number,
  ) {}

  private bump(series: number[], now: number): void {
    const s = Math.floor((now - this.start) / 1000);
    while (series.length <= s) series.push(0);
    series[s]!++;
  }

  offered(now: number): void {
    this.requests++;
    this.bump(this.offeredPerSecond, now);
  }

  call(now: number): void {
    this.bump(this.callsPerSecond, now);
  }

  callKind(kind: CallKind): void {
    this.callKinds[kind]++;
  }

  /** A request ended: `arrivedAt` places it in or after the warm-up. */
  ended(outcome: Outcome, arrivedAt: number, now: number): void {
    if (outcome.decision === null) {
      this.lost++;
      return;
    }
    if (outcome.waited) this.waited++;
    if (arrivedAt >= this.start + this.warmupMs) {
      this.steadyRequests++;
      if (outcome.waited) {
        this.steadyWaited++;
        this.steadyWaits.push(now - arrivedAt);
        if (outcome.cause) this.steadyWaitCauses[outcome.cause]++;
      }
      if (outcome.error) this.steadyErrors++;
    }
    if (outcome.error) this.errors[outcome.error]++;
    if (outcome.decision.allowed) {
      this.admitted++;
      if (outcome.error) this.admittedOnError++;
      this.bump(this.admittedPerSecond, now);
    }
  }

  get errorCount(): number {
    return this.errors.timeout + this.errors.overloaded + this.errors.unavailable + this.errors.queueFull + this.errors.reset;
  }
}
