/** When each isolate calls a fast key's object next: one call budget per key, booked by the object and shared by demand. */
import type { Policy } from "../algorithms";

/**
 * Calls a second one key's object books at most. Cloudflare gives an object a soft limit of about
 * 1,000 requests a second; the rest is left for isolates calling for the first time, for early
 * calls of isolates whose lease ran out, and for the object's alarms.
 */
export const MAX_CALLS_PER_SECOND = 200;

/**
 * A key asked for this many times its sustainable rate (or more) is saturated: every unit it frees
 * is spent at once, so a call is worth making only for several of them.
 */
export const SATURATION = 1.5;

/** What a saturated key's isolates collect a call, on average: cost then follows admitted traffic, not isolates × time. */
export const SATURATED_UNITS_PER_CALL = 10;

/**
 * A saturated key still hears from each isolate at least this many times a period, and at least
 * once a minute, so demand that moves is followed and a day-long window's reset is not missed for hours.
 */
const SATURATED_CALLS_PER_PERIOD = 4;
const SATURATED_MAX_INTERVAL_MS = 60_000;

/** The object's side of the schedule: the last call time it booked. */
export interface Booking {
  nextSyncAt: number;
  cursor: number;
}

/** The rate a key can sustain, in units a ms: a window's limit over its period, a bucket's refill. */
export function sustainedRate(policy: Policy): number {
  return policy.limit / policy.periodMs;
}

/**
 * Whether demand (units a ms, every isolate together) saturates the key: it asks well past what
 * the key sustains, and what is free now would not last it `intervalMs`.
 */
export function isSaturated(policy: Policy, demandRate: number, available: number, intervalMs: number): boolean {
  return demandRate > SATURATION * sustainedRate(policy) && available < demandRate * intervalMs;
}

/**
 * Books an isolate's next call, at least `intervalMs` from now and one budget step after the last
 * booking. The budget is {@link MAX_CALLS_PER_SECOND}; for a saturated key it shrinks to what
 * hands out {@link SATURATED_UNITS_PER_CALL} a call, but never below a few calls a period per isolate.
 * However many isolates share a key, its object hears from them at most the budget a second
 * (plus first and early calls); a key with few isolates keeps the one-interval cadence.
 */
export function bookSync(policy: Policy, cursor: number, peers: number, demandRate: number, saturated: boolean, intervalMs: number, now: number): Booking {
  const flowPerSecond = 1000 * Math.min(demandRate, sustainedRate(policy));
  const floor = (peers * 1000) / Math.min(policy.periodMs / SATURATED_CALLS_PER_PERIOD, SATURATED_MAX_INTERVAL_MS);
  const perSecond = saturated ? Math.min(MAX_CALLS_PER_SECOND, Math.max(flowPerSecond / SATURATED_UNITS_PER_CALL, floor)) : MAX_CALLS_PER_SECOND;
  const nextSyncAt = Math.max(now + intervalMs, cursor + 1000 / perSecond);
  return { nextSyncAt, cursor: nextSyncAt };
}
