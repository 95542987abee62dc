/** A location's relay for one key: its isolates' syncs, forwarded to the key's object together, one batch in flight at a time. */
import type { Policy } from "../algorithms";
import type { SyncRequest } from "./lease";

/**
 * The least time between two batches one relay sends. A relay's batches reach the key's object
 * at most this often (or once a round trip, when that is longer), however many isolates its
 * location runs: with a relay in each of 64 locations, at most 640 calls a second, and far fewer
 * while the object's booking spaces the isolates' own syncs.
 */
export const RELAY_GAP_MS = 100;

/** The most syncs one batch carries: the object's call costs a few µs more per sync. */
export const RELAY_BATCH = 128;

/** The most syncs a relay holds for its key; past it a sync is refused at once, and its rule's onError decides. */
export const RELAY_QUEUE = 1_024;

/** One isolate's sync, as the key's object applies it. */
export interface Forwarded {
  policy: Policy;
  request: SyncRequest;
}

/**
 * The syncs waiting at one relay for one key, and when the next batch may leave: at once when the
 * relay has been quiet for {@link RELAY_GAP_MS}, otherwise that long after the last one left, and
 * never while one is in flight. Time is a parameter; the relay object keeps the timers.
 */
export class RelayQueue<T> {
  private waiting: T[] = [];
  private inFlight = false;
  private lastSentAt = Number.NEGATIVE_INFINITY;

  /** Queues an item; false when the queue is full (the caller refuses it). */
  add(item: T): boolean {
    if (this.waiting.length >= RELAY_QUEUE) return false;
    this.waiting.push(item);
    return true;
  }

  /** When the next batch may leave; undefined while one is in flight or nothing waits. */
  dueAt(): number | undefined {
    if (this.inFlight || this.waiting.length === 0) return undefined;
    return this.lastSentAt + RELAY_GAP_MS;
  }

  /** Takes the next batch, oldest first, and marks it in flight. */
  take(now: number): T[] {
    this.inFlight = true;
    this.lastSentAt = now;
    return this.waiting.splice(0, RELAY_BATCH);
  }

  /** The batch in flight was answered or failed. */
  settled(): void {
    this.inFlight = false;
  }

  get size(): number {
    return this.waiting.length;
  }
}

/**
 * The relay object for `objectName` in `location`: `@<colo>/<objectName>`. A key's object is named
 * `<rule>/<key>`, and a rule's name cannot start with `@`, so the two never meet.
 */
export function relayName(location: string, objectName: string): string {
  return `@${location}/${objectName}`;
}
