/** What a lease refilled on a fixed cycle costs a key held at its limit, idealized: the least it leaves unspent to keep requests from waiting, and the calls that takes. */

/**
 * Units a Poisson demand of `mean` asks beyond `lease`, on average: E[(X − lease)⁺], as
 * E[X] − lease + Σ_{k < lease} (lease − k)·P(X = k), which needs only the terms below the lease.
 * The terms are kept as logarithms: e^−mean alone is 0 in floating point past a mean of about 745.
 */
export function shortfall(mean: number, lease: number): number {
  let logP = -mean;
  let below = 0;
  for (let k = 0; k < lease; k++) {
    below += (lease - k) * Math.exp(logP);
    logP += Math.log(mean / (k + 1));
  }
  return mean - lease + below;
}

/** One isolate count and refill cycle: the smallest lease that keeps waits within the share, and what it costs. */
export interface LeaseBound {
  isolates: number;
  cycleMs: number;
  /** units each isolate must hold when its cycle starts */
  lease: number;
  /** a lower bound on the share of the limit held unspent, so refused at a key held at its limit */
  underAdmission: number;
  /** refills a second, every isolate together */
  syncsPerSecond: number;
  syncsPerRequest: number;
}

/**
 * `isolates` share `perSecond` requests of one unit each (Poisson, evenly) at a key of `limit`
 * units. Each isolate is refilled to the same lease at the start of every `cycleMs`, at once and
 * with no call in flight: better than any real design. A request that finds the lease spent waits
 * on a call, which at most `waits` of the requests may do, so the lease must leave E[(X − lease)⁺]
 * ≤ waits · E[X] for a cycle's demand X. Over the cycle an isolate holds at least lease − E[X]/2
 * unspent on average, and at a key held at its limit (1×: the demand is the limit) every unit held
 * is one the others are refused.
 */
export function leaseBound(isolates: number, perSecond: number, limit: number, cycleMs: number, waits = 0.01): LeaseBound {
  const mean = (perSecond / isolates) * (cycleMs / 1000);
  let lease = 0;
  while (shortfall(mean, lease) > waits * mean) lease++;
  const syncsPerSecond = (isolates * 1000) / cycleMs;
  return { isolates, cycleMs, lease, underAdmission: (isolates * (lease - mean / 2)) / limit, syncsPerSecond, syncsPerRequest: syncsPerSecond / perSecond };
}

/** The longest cycle up to 10 s (in steps of `stepMs`) whose bound keeps under-admission within `most`, or undefined when none does. */
export function longestCycle(isolates: number, perSecond: number, limit: number, most: number, waits = 0.01, stepMs = 10): LeaseBound | undefined {
  let found: LeaseBound | undefined;
  for (let cycleMs = stepMs; cycleMs <= 10_000; cycleMs += stepMs) {
    const bound = leaseBound(isolates, perSecond, limit, cycleMs, waits);
    if (bound.underAdmission <= most) found = bound;
  }
  return found;
}
