/**
 * The limiters under study as fast, allocation-free replicas over typed arrays, one instance per
 * configuration reused from source to source. The floodgate replicas follow src/algorithms step for
 * step (same integer arithmetic, same epoch-aligned buckets) and the accuracy run checks them against
 * floodgate's own `decide` and `adjust` on a sample of sources (see verify.ts): a replica that drifts
 * from the real code fails the benchmark rather than reporting numbers about something else.
 */

/** A limiter seen as an estimator of what one key used in the last period. */
export interface Estimator {
  readonly name: string;
  /** estimates are in units of 1/scale: a request of one unit is admitted iff used + scale ≤ limit × scale */
  readonly scale: number;
  /** whether `used` estimates the requests of the last period (a token bucket's level does not) */
  readonly estimatesWindow: boolean;
  /** forget everything: the next call starts a new key */
  reset(): void;
  /** the estimated use at `now` (scaled), before the request arriving at `now`; `now` never goes back */
  used(now: number): number;
  /** counts one unit at `now`, after `used(now)` */
  add(now: number): void;
}

/** floodgate's sliding window with `buckets` buckets per period (1: Cloudflare's two-window counter). */
export class SlidingWindow implements Estimator {
  readonly scale: number;
  readonly estimatesWindow = true;
  private readonly counts: Float64Array;
  private index = -1;
  private inside = 0;

  constructor(
    readonly name: string,
    readonly buckets: number,
    private readonly periodMs: number,
  ) {
    this.scale = periodMs;
    this.counts = new Float64Array(buckets + 1);
  }

  reset(): void {
    this.index = -1;
  }

  used(now: number): number {
    const { buckets: B, periodMs: P, counts } = this;
    const index = Math.floor((now * B) / P);
    if (index !== this.index) {
      const shift = index - this.index;
      if (this.index < 0 || shift > B) {
        counts.fill(0);
      } else {
        counts.copyWithin(0, shift);
        counts.fill(0, B + 1 - shift);
      }
      let inside = 0;
      for (let i = 1; i <= B; i++) inside += counts[i]!;
      this.inside = inside;
      this.index = index;
    }
    // floodgate's usedScaled: the oldest bucket weighted by its overlap with the window, the rest in full.
    return counts[0]! * (P - (now * B - index * P)) + this.inside * P;
  }

  add(): void {
    this.counts[this.buckets]!++;
    this.inside++;
  }
}

/** A fixed window: one counter per epoch-aligned period, reset when the period changes. */
export class FixedWindow implements Estimator {
  readonly name = "fixed window";
  readonly scale = 1;
  readonly estimatesWindow = true;
  private windowStart = -1;
  private count = 0;

  constructor(private readonly periodMs: number) {}

  reset(): void {
    this.windowStart = -1;
  }

  used(now: number): number {
    const windowStart = now - (now % this.periodMs);
    if (windowStart !== this.windowStart) {
      this.windowStart = windowStart;
      this.count = 0;
    }
    return this.count;
  }

  add(): void {
    this.count++;
  }
}

/** floodgate's token bucket with burst = limit: refills `limit` per period, tokens in units of 1/period. */
export class TokenBucket implements Estimator {
  readonly name = "token bucket (burst = limit)";
  readonly scale: number;
  readonly estimatesWindow = false;
  private level = 0;
  private updatedAt = -1;

  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
  ) {
    this.scale = periodMs;
  }

  reset(): void {
    this.updatedAt = -1;
  }

  used(now: number): number {
    const full = this.limit * this.periodMs;
    if (this.updatedAt < 0) {
      this.level = full;
      this.updatedAt = now;
    } else {
      const elapsed = Math.max(0, now - this.updatedAt);
      this.updatedAt = Math.max(now, this.updatedAt);
      if (this.level >= full || elapsed >= Math.ceil((full - this.level) / this.limit)) this.level = full;
      else this.level += elapsed * this.limit;
    }
    // "Used" is what refill has not yet given back: admitted iff used + period ≤ limit × period, i.e. level ≥ period.
    return full - this.level;
  }

  add(): void {
    this.level -= this.periodMs;
  }
}

/** floodgate's sliding log: every counted request's time; the estimate is exact, what the log holds in (now − period, now]. */
export class SlidingLog implements Estimator {
  readonly name = "sliding log (floodgate's, exact)";
  readonly scale = 1;
  readonly estimatesWindow = true;
  private times: number[] = [];
  private head = 0;

  constructor(private readonly periodMs: number) {}

  reset(): void {
    this.times = [];
    this.head = 0;
  }

  used(now: number): number {
    while (this.head < this.times.length && this.times[this.head]! <= now - this.periodMs) this.head++;
    return this.times.length - this.head;
  }

  add(now: number): void {
    this.times.push(now);
  }
}

/**
 * floodgate's GCRA with `burst` units of tolerance: "used" is how far the theoretical arrival time
 * lies ahead of now, in units × period (so a request fits iff used + period ≤ (burst + 1) × period).
 * With burst = limit − 1 it meters exactly as the token bucket with burst = limit does.
 */
export class Gcra implements Estimator {
  readonly name: string;
  readonly scale: number;
  readonly estimatesWindow = false;
  private debt = 0;
  private updatedAt = -1;

  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
    readonly burst: number,
  ) {
    this.scale = periodMs;
    this.name = `gcra (burst = ${burst === limit - 1 ? "limit − 1" : burst})`;
  }

  reset(): void {
    this.updatedAt = -1;
  }

  used(now: number): number {
    if (this.updatedAt < 0) {
      this.debt = 0;
    } else {
      const elapsed = Math.max(0, now - this.updatedAt);
      this.debt = this.debt <= 0 || elapsed >= Math.ceil(this.debt / this.limit) ? 0 : this.debt - elapsed * this.limit;
    }
    this.updatedAt = Math.max(now, this.updatedAt);
    // The replayer's budget is limit × scale; a tolerance of burst shifts it to (burst + 1) × period.
    return this.debt + (this.limit - this.burst - 1) * this.periodMs;
  }

  add(): void {
    this.debt += this.periodMs;
  }
}

/**
 * floodgate's token bucket with burst = limit and a warmup (src/algorithms/warmup.ts): kept as the
 * time until full (1/limit ms) and the coldness then (1/period units), a new key full and cold.
 * "Used" is what the bucket lacks, as for the plain bucket.
 */
export class WarmingBucket implements Estimator {
  readonly name: string;
  readonly scale: number;
  readonly estimatesWindow = false;
  private readonly w: number;
  private debt = 0;
  private cold = 0;
  private updatedAt = -1;

  constructor(
    private readonly limit: number,
    private readonly periodMs: number,
    readonly warmupMs: number,
  ) {
    this.scale = periodMs;
    this.w = warmupMs * limit;
    this.name = `token bucket (burst = limit), warmup ${warmupMs / 1000} s`;
  }

  reset(): void {
    this.updatedAt = -1;
  }

  used(now: number): number {
    const { w, limit } = this;
    const elapsed = this.updatedAt < 0 ? Number.POSITIVE_INFINITY : Math.max(0, now - this.updatedAt);
    if (elapsed >= Math.ceil((this.debt + w) / limit)) {
      this.debt = 0;
      this.cold = w;
    } else if (elapsed * limit < this.debt) {
      this.debt -= elapsed * limit;
    } else {
      this.cold = Math.min(w, Math.max(0, this.cold) + elapsed * limit - this.debt);
      this.debt = 0;
    }
    this.updatedAt = Math.max(now, this.updatedAt);
    if (this.debt === 0) return 0;
    // The least coldness whose climb reaches the current one's plus the time left, less where the refill ends.
    const target = climb(w, this.cold) + this.debt;
    if (2 * target <= w) return target - this.cold;
    let x = Math.ceil((w + (Math.sqrt(8 * w * target - 3 * w * w) - w) / 2) / 2);
    while (climb(w, x) < target) x += 1;
    while (climb(w, x - 1) >= target) x -= 1;
    return x - this.cold;
  }

  add(): void {
    const end = this.cold - this.periodMs;
    this.debt += climb(this.w, this.cold) - climb(this.w, end);
    this.cold = end;
  }
}

/** Guava's integral of the interval, as src/algorithms/warmup.ts counts it. */
function climb(w: number, x: number): number {
  const over = 2 * x - w;
  return over <= 0 ? x : x + Math.floor((over * over) / (2 * w));
}
