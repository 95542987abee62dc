/** Per-object circuit breakers: after failed calls in a row, a key's object is left alone for a while, and onError decides at once. */

/** The longest an object is left alone, however often it has failed. */
export const MAX_BACKOFF_MS = 30_000;

/** How long to leave an object alone after `failures` failed calls in a row: `baseMs`, doubling each time. */
export function backoffMs(baseMs: number, failures: number): number {
  return Math.min(baseMs * 2 ** (failures - 1), MAX_BACKOFF_MS);
}

/** A strict decision waits for the object; one failure may be a blip (the object moved, say), two in a row are not. */
const FAILURES_TO_OPEN = 2;

interface Breaker {
  failures: number;
  retryAt: number;
}

/**
 * The breakers of one isolate, by object name. A closed breaker lets calls through; after
 * {@link FAILURES_TO_OPEN} failures in a row it opens for {@link backoffMs} of the rule's timeout,
 * then lets the next call through to try again: a success closes it, a failure opens it for twice
 * as long. Only failing objects are tracked, at most `maxObjects` of them.
 *
 * @example
 * const breakers = new Breakers();
 * if (breakers.waitFor(name, now) > 0) return onError();
 */
export class Breakers {
  private readonly failing = new Map<string, Breaker>();

  constructor(private readonly maxObjects = 10_000) {}

  /** ms until the named object may be called again; 0 when it may be called now. */
  waitFor(name: string, now: number): number {
    const breaker = this.failing.get(name);
    return breaker && breaker.retryAt > now ? breaker.retryAt - now : 0;
  }

  failed(name: string, baseMs: number, now: number): void {
    let breaker = this.failing.get(name);
    if (!breaker) {
      if (this.failing.size >= this.maxObjects) this.failing.clear();
      this.failing.set(name, (breaker = { failures: 0, retryAt: 0 }));
    }
    // Requests that were already waiting when it opened fail together: they are one failure, not many.
    if (breaker.retryAt > now) return;
    breaker.failures++;
    if (breaker.failures >= FAILURES_TO_OPEN) breaker.retryAt = now + backoffMs(baseMs, breaker.failures - FAILURES_TO_OPEN + 1);
  }

  succeeded(name: string): void {
    this.failing.delete(name);
  }
}
