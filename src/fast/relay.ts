/** A location's relay for one key: its isolates' syncs, forwarded to the key's object together, one batch in flight at a time. */
import type { Policy } from "../algorithms";
import type { Aggregate, Rule } from "../config/types";
import type { Lease, SyncRequest } from "./lease";

/**
 * The least time between two batches one relay sends: a relay's batches reach the key's object at
 * most this often (or once a round trip, when that is longer), however many isolates its location
 * runs. The key's object asks for more (see {@link relayGap}) once more relays call it.
 */
export const RELAY_GAP_MS = 100;

/**
 * The calls a second a key's object takes from its relays together: each relay's gap is its share.
 * A relay of 64 isolates hears a few syncs a second, so its batches are small: the gap, not the
 * batching, is what bounds the object's calls (measured in bench/SIMULATION.md's Relays).
 */
export const RELAY_CALLS_PER_SECOND = 200;

/**
 * The longest gap a key's object asks of a relay: a sync that waits at a relay for the gap, then
 * for its batch's round trip (up to 300 ms across the world), is still answered within the default
 * 1 s timeout. Past 100 relays the object's calls then grow with them, 2 a second each.
 */
export const MAX_RELAY_GAP_MS = 500;

/**
 * How long a relay waits, at most, for a batch its isolates stopped waiting for (it timed out)
 * before it sends the next: a slow key's object then has one batch of each relay at a time, not
 * one per gap piling in its queue. Past about this much work queued an object refuses calls as
 * overloaded (the simulation's assumption), so a batch unanswered by then is taken as lost.
 */
export const RELAY_HOLD_MS = 5_000;

/** A relay counts as calling a key's object for this long after its last batch. */
export const RELAY_ACTIVE_MS = 10_000;

/**
 * The most syncs one batch carries: the object's call costs a few µs more per sync. A continent's
 * relay at a cold start hears from a thousand isolates within a second, and with one batch in
 * flight it forwards at most this many a round trip: at 128 a batch the simulation's syncs missed
 * their timeout there, at 512 none did.
 */
export const RELAY_BATCH = 512;

/** The most syncs a relay holds for its key; past it a sync is refused at once, and its rule's onError decides. */
export const RELAY_QUEUE = 1_024;

/** One isolate's sync, as the key's object applies it. */
export interface Forwarded {
  policy: Policy;
  request: SyncRequest;
}

/** The key's object's answer to a batch: each sync's lease (or why it failed), and the gap the relay is to keep. */
export interface Relayed {
  answers: (Lease | { error: string })[];
  gapMs: number;
}

/**
 * The syncs waiting at one relay for one key, and when the next batch may leave: at once when the
 * relay has been quiet for its gap (RELAY_GAP_MS, or what the key's object last asked for),
 * otherwise that long after the last one left, or sooner when a sync waiting would otherwise miss
 * its deadline (see {@link relayDeadline}); never while one is in flight. Time is a parameter; the
 * relay object keeps the timers.
 */
export class RelayQueue<T> {
  private waiting: { item: T; dueBy: number }[] = [];
  private inFlight = false;
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private gapMs = RELAY_GAP_MS;

  /** Queues an item that must leave by `dueBy`; false when the queue is full (the caller refuses it). */
  add(item: T, dueBy = Number.POSITIVE_INFINITY): boolean {
    if (this.waiting.length >= RELAY_QUEUE) return false;
    this.waiting.push({ item, dueBy });
    return true;
  }

  /** When the next batch may leave; undefined while one is in flight or nothing waits. */
  dueAt(): number | undefined {
    if (this.inFlight || this.waiting.length === 0) return undefined;
    return this.waiting.reduce((due, w) => Math.min(due, w.dueBy), this.lastSentAt + this.gapMs);
  }

  /** Takes the next batch, oldest first, and marks it in flight. */
  take(now: number): T[] {
    this.inFlight = true;
    this.lastSentAt = now;
    return this.waiting.splice(0, RELAY_BATCH).map((w) => w.item);
  }

  /** The batch in flight was answered (with the gap the key's object asks for) or failed. */
  settled(gapMs = this.gapMs): void {
    this.inFlight = false;
    this.gapMs = gapMs;
  }

  get size(): number {
    return this.waiting.length;
  }
}

/**
 * When a sync that reached its relay at `now` must leave in a batch: within half its rule's
 * timeout, leaving the other half for the batch's round trip, so a rule with a short timeout is
 * not failed by the pace a key's object sets for a default one.
 */
export function relayDeadline(now: number, timeoutMs: number): number {
  return now + timeoutMs / 2;
}

/**
 * The relay object for `objectName` in `place` (a colo, or a continent): `@<place>/<objectName>`. A
 * key's object is named `<rule>/<key>`, and a rule's name cannot start with `@`, so the two never meet.
 */
export function relayName(place: string, objectName: string): string {
  return `@${place}/${objectName}`;
}

/**
 * The shapes of a location's code (`request.cf.colo`, "AMS") and a continent's ("EU"). Each names
 * a relay object, so anything else, from a caller that sets `cf` itself, names none: one object per
 * value would follow a client's own string.
 */
export const LOCATION_CODE = /^[A-Za-z0-9]{1,8}$/;
export const CONTINENT_CODE = /^[A-Za-z0-9]{2}$/;

/** Where a request comes from, as Cloudflare says (`request.cf`). */
export interface Whereabouts {
  /** `request.cf.colo`, a data center's code like "AMS" */
  location?: string;
  /** `request.cf.continent`, a code like "EU" */
  continent?: string;
}

/**
 * `aggregate: "auto"` sends a key's syncs through the continent's relay once the key's object
 * reports at least this many isolates syncing with it, and straight to it again once they are no
 * more than AUTO_DIRECT_PEERS. Straight, each isolate calls about once an interval, up to the
 * object's booking budget (200 a second, src/fast/schedule.ts): past a few hundred isolates the
 * calls it does not book (first calls, early top-ups) take it past 250 a second and towards the
 * 1,000 one object takes (bench/SIMULATION.md: 428–495 at 512 isolates, 766–922 at 4,096), while
 * through 6 continental relays it hears 45–47 and 47–48. Below, a relay would only add its
 * batching to each answer: at 64 isolates the object's busiest second took about 100 calls straight.
 */
export const AUTO_RELAY_PEERS = 256;
export const AUTO_DIRECT_PEERS = 128;

/** Whether a key that `aggregate: "auto"` routes by goes through relays, after its object reported `peers` (`relayed`: whether it did before). */
export function crowded(relayed: boolean, peers: number): boolean {
  return peers >= AUTO_RELAY_PEERS || (relayed && peers > AUTO_DIRECT_PEERS);
}

/**
 * Whether `aggregate: "auto"` sends a key's first sync in an isolate through the relay: for a rule
 * with one key for every request (`key: "global"`), which every isolate shares, so that when they
 * all start at once (a deploy) their first syncs reach the key's object in batches, not as a herd.
 * Any other rule's first sync goes straight: most per-client keys never see a crowd, and a relay
 * would add its batching to the first request of each.
 */
export function firstThroughRelay(rule: Pick<Rule, "aggregate" | "key">): boolean {
  return rule.aggregate === "auto" && rule.key.length === 1 && rule.key[0]!.source === "global";
}

/** How a rule's syncs for a key go now: `aggregate`, with "auto" resolved by whether the key is `relayed` (see {@link crowded}). */
export function syncsThrough(aggregate: Aggregate | undefined, relayed: boolean): "location" | "continent" | undefined {
  return aggregate === "auto" ? (relayed ? "continent" : undefined) : aggregate;
}

/**
 * The relay a rule's sync goes through from `from`: its colo's for `"location"`, its continent's
 * for `"continent"` (as {@link syncsThrough} resolves the rule's `aggregate`); undefined (straight
 * to the key's object) for a rule that does not aggregate, or when the caller did not say where it is.
 */
export function relayFor(aggregate: "location" | "continent" | undefined, from: Whereabouts, objectName: string): string | undefined {
  const place = aggregate === "location" ? from.location : aggregate === "continent" ? from.continent : undefined;
  return place === undefined ? undefined : relayName(place, objectName);
}

/** The gap a key's object asks of each of `relays` relays calling it: their share of RELAY_CALLS_PER_SECOND, within RELAY_GAP_MS and MAX_RELAY_GAP_MS. */
export function relayGap(relays: number): number {
  return Math.min(MAX_RELAY_GAP_MS, Math.max(RELAY_GAP_MS, Math.ceil((1_000 * relays) / RELAY_CALLS_PER_SECOND)));
}

/** The relays a key's object heard from within RELAY_ACTIVE_MS, to pace them by (kept in memory: a restart only loosens the pacing for a moment). */
export class RelayBook {
  private readonly heardAt = new Map<string, number>();

  /** Notes a batch from `relay` at `now`, and returns the gap it is asked to keep. */
  heard(relay: string, now: number): number {
    this.heardAt.delete(relay);
    this.heardAt.set(relay, now);
    // Oldest first (each is re-inserted when heard), so the silent ones are at the front.
    for (const [id, at] of this.heardAt) {
      if (at > now - RELAY_ACTIVE_MS) break;
      this.heardAt.delete(id);
    }
    return relayGap(this.heardAt.size);
  }
}
