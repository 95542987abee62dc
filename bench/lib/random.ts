/** Seeded, deterministic randomness for traces and workloads: the same seed gives the same numbers everywhere. */

/** A 32-bit hash step (splitmix32's finaliser): turns (seed, index) into an independent-looking seed. */
export function mix32(seed: number, index = 0): number {
  let z = (seed + Math.imul(index + 1, 0x9e3779b9)) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** sfc32: a small, fast generator with a 128-bit state; `next()` is uniform in [0, 1). */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    this.a = mix32(seed, 1);
    this.b = mix32(seed, 2);
    this.c = mix32(seed, 3);
    this.d = 1;
    for (let i = 0; i < 12; i++) this.next();
  }

  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** uniform in [lo, hi) */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** an integer in [lo, hi] */
  int(lo: number, hi: number): number {
    return lo + Math.floor((hi - lo + 1) * this.next());
  }

  /** exponential with the given mean */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** Pareto with shape `alpha` and minimum `xm`: heavy-tailed, mean alpha·xm/(alpha−1) for alpha > 1 */
  pareto(alpha: number, xm: number): number {
    return xm / Math.pow(1 - this.next(), 1 / alpha);
  }

  /** log-uniform in [lo, hi) */
  logUniform(lo: number, hi: number): number {
    return lo * Math.pow(hi / lo, this.next());
  }
}

/**
 * `count` draws of a Zipf-distributed rank in [0, n): rank k is chosen with probability ∝ 1/(k+1)^s.
 * Drawn by inverting the cumulative weights with a binary search, so any n and s work.
 */
export function zipfSequence(n: number, s: number, count: number, seed: number): Int32Array {
  const cumulative = new Float64Array(n);
  let total = 0;
  for (let k = 0; k < n; k++) cumulative[k] = total += 1 / Math.pow(k + 1, s);
  const random = new Random(seed);
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const u = random.next() * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cumulative[mid]! <= u) lo = mid + 1;
      else hi = mid;
    }
    out[i] = lo;
  }
  return out;
}
