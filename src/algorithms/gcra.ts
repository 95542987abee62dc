/** GCRA, the generic cell rate algorithm: one unit every periodMs / limit, with `burst` units of tolerance (nginx limit_req, redis-cell). */
import { takenAt } from "./taken-at";
import type { GcraState, Outcome, Policy } from "./types";

/**
 * Decides one request of `cost` units at `now` (epoch ms). The emission interval is
 * T = periodMs / limit; the theoretical arrival time (TAT) is when the key would be idle again.
 * A request conforms if, with it, TAT − now ≤ (burst + 1) × T: `burst` units of tolerance beyond
 * the one the rate allows now. Admitted requests advance TAT by cost × T; denied ones change nothing.
 *
 * TAT − now is kept as `debt`, in units × periodMs (T is then exactly periodMs in those units, and
 * one ms pays off `limit` of them): integer arithmetic, no rounding, as the token bucket's.
 *
 * With a `delay` below `burst` (nginx's two-stage `delay=`), a conforming request beyond the first
 * 1 + delay units of a burst is admitted with `holdMs`: how long until it would have conformed
 * with a tolerance of `delay`.
 *
 * @example
 * const { decision, state } = gcra({ algorithm: "gcra", limit: 10, periodMs: 1_000, burst: 5, buckets: 1 }, undefined, 1, Date.now());
 */
export function gcra(policy: Policy, stored: GcraState | undefined, cost: number, now: number): Outcome<GcraState> {
  const at = stored ? Math.max(now, stored.updatedAt) : now;
  const debt = debtAt(policy, stored, at);
  const need = cost * policy.periodMs;
  const allowed = debt + need <= capacity(policy);
  const next = gcraState(policy.periodMs, allowed ? debt + need : debt, at);
  const free = capacity(policy) - next.debt;
  const remaining = Math.max(0, Math.floor(free / policy.periodMs));
  const resetAt = at + Math.ceil(next.debt / policy.limit);
  // The next whole unit: when the free tolerance reaches (remaining + 1) units; an idle key has all of it.
  const moreAt = next.debt <= 0 ? at : at + Math.ceil(((remaining + 1) * policy.periodMs - free) / policy.limit);
  if (allowed) {
    const hold = Math.max(0, next.debt - (delayOf(policy) + 1) * policy.periodMs);
    const decision = { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter: 0 };
    return { decision: hold > 0 ? { ...decision, holdMs: Math.ceil(hold / policy.limit) } : decision, state: next };
  }
  // A cost above 1 + burst never conforms; it is told to wait one period rather than forever.
  const fits = cost <= policy.burst + 1;
  // debt − (capacity − need), not debt + need − capacity: the sum may pass 2^53 (a burst near the bound) and round.
  const retryAfter = fits ? at - now + Math.ceil((debt - (capacity(policy) - need)) / policy.limit) : policy.periodMs;
  const reason = fits ? "limit" : "cost-exceeds-capacity";
  return { decision: { allowed, limit: policy.limit, remaining, resetAt, moreAt, retryAfter, reason }, state: next };
}

/**
 * Advances TAT by `units` (negative: moves it back, never behind `now`) with no decision: refunds,
 * and units taken without asking, which may push TAT past the tolerance until time pays it off.
 * Units reported taken at `at`, before now, are taken then or at the state's last change if that is
 * later (see {@link takenAt}); a take leaves TAT at most `owedAtMost` units ahead, and never nearer
 * than it was (see `adjustTokenBucket`).
 */
export function adjustGcra(policy: Policy, stored: GcraState | undefined, units: number, at: number, now: number, owedAtMost = Number.POSITIVE_INFINITY): GcraState {
  const change = units * policy.periodMs;
  if (change <= 0) {
    const ref = stored ? Math.max(now, stored.updatedAt) : now;
    return gcraState(policy.periodMs, Math.max(0, debtAt(policy, stored, ref) + change), ref);
  }
  const when = takenAt(stored, at, now);
  const debt = debtAt(policy, stored, when);
  return gcraState(policy.periodMs, Math.max(debt, Math.min(debt + change, owedAtMost * policy.periodMs)), when);
}

/** Units TAT lies ahead of `now`, rounded up: what a change of rule carries over. */
export function usedGcra(policy: Policy, stored: GcraState, now: number): number {
  return Math.ceil(debtAt(policy, stored, Math.max(now, stored.updatedAt)) / policy.periodMs);
}

/** Units admitted at once from idle: the one the rate allows plus the tolerance. */
function capacity(policy: Policy): number {
  return (policy.burst + 1) * policy.periodMs;
}

function delayOf(policy: Policy): number {
  return policy.delay === undefined ? policy.burst : Math.min(policy.delay, policy.burst);
}

/**
 * TAT − `at` in units × periodMs, paid off at `limit` per ms since the last update. A changed
 * period converts the debt, rounding up: units are never lost to the conversion.
 */
function debtAt(policy: Policy, stored: GcraState | undefined, at: number): number {
  if (!stored) return 0;
  const debt = stored.periodMs === policy.periodMs ? stored.debt : Math.ceil((stored.debt / stored.periodMs) * policy.periodMs);
  const elapsed = at - stored.updatedAt;
  // Compared by division so that a long idle key cannot overflow elapsed × limit.
  if (debt <= 0 || elapsed >= Math.ceil(debt / policy.limit)) return 0;
  return debt - elapsed * policy.limit;
}

function gcraState(periodMs: number, debt: number, updatedAt: number): GcraState {
  return { algorithm: "gcra", periodMs, debt, updatedAt };
}
