/** What a lease costs a key held at its limit, idealized, refilled on a fixed cycle or at a reorder point: the least it leaves unspent to keep requests from waiting, and the calls that takes. */
import { MIXED_RTT } from "./latency";

/**
 * A Poisson count X of `mean` below `n`: P(X < n), and what `n` units leave unspent on average,
 * E[(n − X)⁺] = Σ_{k < n} (n − k)·P(X = k). The terms are kept as logarithms: e^−mean alone is 0
 * in floating point past a mean of about 745.
 */
function below(mean: number, n: number): { chance: number; left: number } {
  let logP = -mean;
  let chance = 0;
  let left = 0;
  for (let k = 0; k < n; k++) {
    const p = Math.exp(logP);
    chance += p;
    left += (n - k) * p;
    logP += Math.log(mean / (k + 1));
  }
  return { chance, left };
}

/**
 * Units a Poisson demand of `mean` asks beyond `lease`, on average: E[(X − lease)⁺], as
 * E[X] − lease + E[(lease − X)⁺], which needs only the terms below the lease.
 */
export function shortfall(mean: number, lease: number): number {
  return mean - lease + below(mean, lease).left;
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

/**
 * One isolate refilled at a reorder point (continuous review): when what it holds and has asked for
 * falls to `reorder`, it asks for `refill` more, which come a lead time later that brings Poisson
 * demand of `leadMean`. What it holds and has asked for is then evenly one of reorder + 1 … reorder
 * + refill (inventory models' (r, Q) policy), and a request finds nothing left when the lead time's
 * demand took all of it. Returns the share of requests that do (PASTA) and the units held on average.
 */
export function reorderPolicy(leadMean: number, reorder: number, refill: number): { waited: number; held: number } {
  let waited = 0;
  let held = 0;
  for (let position = reorder + 1; position <= reorder + refill; position++) {
    const { chance, left } = below(leadMean, position);
    waited += 1 - chance;
    held += left;
  }
  return { waited: waited / refill, held: held / refill };
}

/** One isolate count under a call budget, each isolate refilled at its own reorder point: what both 1× targets would take. */
export interface ReorderBound {
  isolates: number;
  /** units a call brings: the fewest that keep the calls within the budget */
  refill: number;
  callsPerSecond: number;
  /** the lowest and highest reorder point, over the isolates' round trips */
  reorder: [number, number];
  waited: number;
  /** units an isolate holds on average */
  held: number;
  /** the share of the limit held unspent, so refused at a key held at its limit */
  underAdmission: number;
  /** what isolates vanishing with what they hold take on top, as a share of the admissions */
  vanished: number;
}

/**
 * `isolates` share `perSecond` requests of one unit each (Poisson, evenly) at a key of `limit`,
 * each isolate its own round trip from MIXED_RTT (twenty points a band) away from an object that
 * always has units to give, at once: better than any real design at a key held at its limit, whose
 * object has only what the window frees. Calls stay within `callsPerSecond`, so each brings
 * ⌈perSecond ÷ callsPerSecond⌉ units; each isolate's reorder point is raised where a unit held cuts
 * the most waiting, until at most `waits` of the requests wait. Isolates vanish after `lifetimeMs`
 * on average with what they hold, which a key's object then counts as spent.
 */
export function reorderBound(isolates: number, perSecond: number, limit: number, callsPerSecond: number, lifetimeMs: number, waits = 0.01): ReorderBound {
  const rate = perSecond / isolates / 1000;
  const refill = Math.max(1, Math.ceil(perSecond / callsPerSecond));
  const points = MIXED_RTT.flatMap((band) => Array.from({ length: 20 }, (_, i) => ({ weight: band.share / 20, leadMean: rate * (band.loMs + ((band.hiMs - band.loMs) * (i + 0.5)) / 20) })));
  const reorder = points.map(() => 0);
  const policy = (i: number, r = reorder[i]!) => reorderPolicy(points[i]!.leadMean, r, refill);
  const total = (pick: (x: { waited: number; held: number }) => number) => points.reduce((sum, p, i) => sum + p.weight * pick(policy(i)), 0);
  while (total((x) => x.waited) > waits) {
    let best = 0;
    let gain = -1;
    points.forEach((_, i) => {
      const now = policy(i);
      const next = policy(i, reorder[i]! + 1);
      const g = (now.waited - next.waited) / (next.held - now.held);
      if (g > gain) [best, gain] = [i, g];
    });
    reorder[best]!++;
  }
  const held = total((x) => x.held);
  return {
    isolates,
    refill,
    callsPerSecond: perSecond / refill,
    reorder: [Math.min(...reorder), Math.max(...reorder)],
    waited: total((x) => x.waited),
    held,
    underAdmission: (isolates * held) / limit,
    vanished: (isolates / (lifetimeMs / 1000)) * held / perSecond,
  };
}
