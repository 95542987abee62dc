/** Token bucket with a warmup, Guava's SmoothWarmingUp: after an idle spell the refill starts at a third of the rate and climbs to it. */
import type { Outcome, Policy, WarmingBucketState } from "./types";

/**
 * Decides one request of `cost` units at `now` for a token bucket whose policy has a `warmupMs`.
 *
 * Guava's SmoothWarmingUp, adapted to a bucket that saves up to `burst` units. The key has a
 * coldness (Guava's stored permits): it grows while the bucket is full, one unit per stable
 * interval (period / limit), up to `limit × warmup / period` units (Guava's maxPermits), and falls
 * by one for every unit the bucket refills. Refilling a unit takes Guava's interval at the key's
 * coldness: the stable interval up to half of the maximum (thresholdPermits), then climbing
 * linearly to three times it when fully cold (coldFactor 3). So the saved burst passes at once as
 * in any token bucket; after an idle spell the refill then starts at a third of the rate and is
 * back to it after `warmup` of refilling, as Guava's rate climbs over its warmup period. An idle
 * spell shorter than `warmup / 2` leaves the key warm; one of `warmup` makes it fully cold. A key
 * with no state (never seen, or forgotten once at rest) is full and fully cold.
 *
 * The state is kept as the time until the bucket is full and the coldness it will have then, as
 * GCRA keeps its TAT: taking units makes that time longer by what refilling them will take (the
 * last units refill warmest), so nothing is ever rounded away between decisions. Coldness and
 * tokens are counted in 1/periodMs of a unit, as the plain bucket's level, and time in 1/limit ms:
 * a warm unit takes periodMs of them, a fully cold one three times as many.
 *
 * @example
 * const { decision, state } = warmingBucket({ algorithm: "token-bucket", limit: 10, periodMs: 1_000, burst: 10, buckets: 1, warmupMs: 30_000 }, undefined, 1, Date.now());
 */
export function warmingBucket(
  policy: Policy,
  stored: WarmingBucketState | undefined,
  cost: number,
  now: number,
): Outcome<WarmingBucketState> {
  const { limit, periodMs, burst } = policy;
  const w = maxCold(policy);
  const { debt, cold, updatedAt: t } = settle(policy, stored, now);
  const from = climb(w, cold);
  const missing = debt === 0 ? 0 : unclimb(w, from + debt) - cold;
  const allowed = cost <= burst && missing <= (burst - cost) * periodMs;
  // Taking units makes the refill longer by theirs, at the warm end: the coldness it ends at falls by them.
  const units = allowed ? cost * periodMs : 0;
  const end = cold - units;
  const toEnd = units === 0 ? from : climb(w, end);
  const due = debt + from - toEnd;
  const state = stateOf(policy, { debt: due, cold: end, updatedAt: t });
  const remaining = Math.max(0, burst - Math.ceil((missing + units) / periodMs));
  /** ms until the bucket lacks no more than `short` (1/periodMs units), given that it lacks more now */
  const until = (short: number) => Math.ceil((due - (climb(w, end + short) - toEnd)) / limit);
  // Back at rest (full, then cooled to fully cold): a state forgotten then comes back as it was.
  const resetAt = t + Math.ceil((due + w - Math.max(0, end)) / limit);
  const moreAt = remaining >= burst ? t : t + until((burst - remaining - 1) * periodMs);
  if (allowed) return { decision: { allowed, limit, remaining, resetAt, moreAt, retryAfter: 0 }, state };
  const fits = cost <= burst;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  // Counted from the state's time, later than now when the clock stepped back behind it.
  const retryAfter = fits ? t - now + until((burst - cost) * periodMs) : periodMs;
  return { decision: { allowed, limit, remaining, resetAt, moreAt, retryAfter, reason }, state };
}

/**
 * Takes `units` (negative: gives them back) with no decision. Taking may leave the bucket in debt,
 * refilled at the key's coldness; giving back stops at `burst`, and undoes exactly what taking the
 * same units did, coldness included.
 */
export function adjustWarmingBucket(policy: Policy, stored: WarmingBucketState | undefined, units: number, now: number): WarmingBucketState {
  const w = maxCold(policy);
  const { debt, cold, updatedAt } = settle(policy, stored, now);
  if (units >= 0) {
    const end = cold - units * policy.periodMs;
    return stateOf(policy, { debt: debt + climb(w, cold) - climb(w, end), cold: end, updatedAt });
  }
  const back = Math.min(-units * policy.periodMs, missingOf(w, { debt, cold, updatedAt }));
  // Giving back all that is missing leaves the bucket full, whatever part of a unit was refilling.
  return stateOf(policy, { debt: Math.max(0, debt - (climb(w, cold + back) - climb(w, cold))), cold: cold + back, updatedAt });
}

/** Whole units taken from a full bucket at `now`, rounded up (more than `burst` while in debt). */
export function usedWarmingBucket(policy: Policy, stored: WarmingBucketState, now: number): number {
  return Math.ceil(missingOf(maxCold(policy), settle(policy, stored, now)) / policy.periodMs);
}

/**
 * A warming state at `now` holding `level` (tokens × periodMs, as the plain bucket's) with the
 * key warm: what a bucket that gains a warmup under a live key starts from, since the key was
 * served at the full rate until then.
 */
export function warmFrom(policy: Policy, level: number, now: number): WarmingBucketState {
  const missing = Math.max(0, policy.burst * policy.periodMs - level);
  return stateOf(policy, { cold: -missing, debt: climb(maxCold(policy), 0) - climb(maxCold(policy), -missing), updatedAt: now });
}

/** A warming state's level at `now` (tokens × its own periodMs) and the time of it: what a bucket that loses its warmup keeps. */
export function levelOfWarming(stored: WarmingBucketState, now: number): { level: number; updatedAt: number } {
  const own = policyOf(stored);
  const at = settle(own, stored, now);
  return { level: own.burst * own.periodMs - missingOf(maxCold(own), at), updatedAt: at.updatedAt };
}

/** Guava's maxPermits, limit × warmup / period units, in 1/periodMs of a unit: also the time in 1/limit ms a full bucket takes to cool fully. */
function maxCold(policy: Pick<Policy, "limit" | "warmupMs">): number {
  return (policy.warmupMs ?? 0) * policy.limit;
}

/** The settled part of a state: time until full (1/limit ms), coldness when full (1/periodMs units), as of `updatedAt`. */
interface Settled {
  debt: number;
  cold: number;
  updatedAt: number;
}

/**
 * The state at `now` (or at its update, if the clock stepped back) under `policy`: a full bucket
 * cools one unit of coldness per 1/limit ms, up to fully cold. A state kept under another limit,
 * period, burst or warmup is read under its own and carried over: what it lacks as the plain bucket
 * carries what was taken, its coldness as the same fraction of the new maximum (as Guava's setRate does).
 */
function settle(policy: Policy, stored: WarmingBucketState | undefined, now: number): Settled {
  const w = maxCold(policy);
  if (!stored) return { debt: 0, cold: w, updatedAt: now };
  if (sameShape(policy, stored)) return advance(w, policy.limit, stored, now);
  const own = policyOf(stored);
  const at = advance(maxCold(own), own.limit, stored, now);
  const missing = missingOf(maxCold(own), at);
  const coldNow = Math.min(w, Math.floor((Math.max(0, at.cold + missing) / maxCold(own)) * w));
  // What was taken stays taken, rounded up, whatever the new burst: as the plain bucket carries a level.
  const refill = Math.ceil((missing / own.periodMs) * policy.periodMs);
  return { cold: coldNow - refill, debt: climb(w, coldNow) - climb(w, coldNow - refill), updatedAt: at.updatedAt };
}

function advance(w: number, limit: number, stored: Settled, now: number): Settled {
  const t = Math.max(now, stored.updatedAt);
  const elapsed = t - stored.updatedAt;
  // Compared by division so that a long idle key cannot overflow elapsed × limit.
  if (elapsed >= Math.ceil((stored.debt + w) / limit)) return { debt: 0, cold: w, updatedAt: t };
  const passed = elapsed * limit;
  if (passed < stored.debt) return { debt: stored.debt - passed, cold: stored.cold, updatedAt: t };
  return { debt: 0, cold: Math.min(w, Math.max(0, stored.cold) + passed - stored.debt), updatedAt: t };
}

/** What the bucket lacks (1/periodMs units): the refill still to come, from the coldness it has now down to `cold`. */
function missingOf(w: number, at: Settled): number {
  if (at.debt === 0) return 0;
  return unclimb(w, climb(w, at.cold) + at.debt) - at.cold;
}

/**
 * Time (1/limit ms) to refill from coldness `x` to 0 (from below 0: −|x|), rounded down: Guava's
 * integral of the interval over the stored permits. With coldness x in 1/periodMs units and the
 * maximum w, the interval is 1 up to w / 2 and climbs linearly to 3 at w, so the integral is
 * x + (2x − w)² / 2w past w / 2. Differences of it are what refilling between two colds takes.
 *
 * The square is exact up to limit × warmup of 2^26.5 (90 million, e.g. 1,500 a minute over a
 * minute); past it a double rounds it, to within a 1/limit ms. Either way the function only ever
 * grows with x, and that is what exactness rests on here: a denial's retryAfter, `moreAt` and a
 * refund undoing a take are all worked out from the same function.
 */
function climb(w: number, x: number): number {
  const over = 2 * x - w;
  return over <= 0 ? x : x + Math.floor((over * over) / (2 * w));
}

/** The least coldness x with climb(w, x) ≥ target. */
function unclimb(w: number, target: number): number {
  if (2 * target <= w) return target;
  // x + (2x − w)² / 2w = target, solved for x past w / 2 and then made exact.
  let x = Math.ceil((w + (Math.sqrt(8 * w * target - 3 * w * w) - w) / 2) / 2);
  while (climb(w, x) < target) x += 1;
  while (climb(w, x - 1) >= target) x -= 1;
  return x;
}

function stateOf(policy: Policy, { debt, cold, updatedAt }: Settled): WarmingBucketState {
  const { periodMs, limit, burst } = policy;
  return { algorithm: "token-bucket", periodMs, limit, burst, warmupMs: policy.warmupMs ?? 0, debt, cold, updatedAt };
}

function sameShape(policy: Policy, stored: WarmingBucketState): boolean {
  return (
    stored.periodMs === policy.periodMs && stored.limit === policy.limit && stored.burst === policy.burst && stored.warmupMs === policy.warmupMs
  );
}

function policyOf(stored: WarmingBucketState): Policy {
  const { periodMs, limit, burst, warmupMs } = stored;
  return { algorithm: "token-bucket", limit, periodMs, burst, buckets: 1, warmupMs };
}
