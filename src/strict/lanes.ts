/** The waiting lines of strict requests, one per key and policy, with no clock or I/O of their own: what the coalescer and the simulation both batch with. */
import type { Policy } from "../algorithms";
import { policyKey } from "../config/policy";

interface Lane<W> {
  waiting: W[];
  /** the batch in flight, if any; `progressAt` is when it was handed out */
  inFlight: W[] | null;
  progressAt: number;
}

/**
 * The line a request for the named object under `policy` joins: requests under two policies (a
 * rule re-read with another limit, warmup, …) never share a batch, which the object decides
 * under one policy.
 */
export function laneOf(name: string, policy: Policy): string {
  return `${name}\n${policyKey(policy)}`;
}

/**
 * Lines of waiters `W`, each with at most one batch in flight: a waiter joins its line, and a batch
 * of at most `maxBatch` (the oldest first) is handed out when none is in flight, when the one in
 * flight has made no progress for too long, or when the one in flight ends. At most `maxWaiting`
 * wait per line (see {@link Lanes.full}).
 */
export class Lanes<W> {
  private readonly lanes = new Map<string, Lane<W>>();

  constructor(
    private readonly maxBatch = 128,
    private readonly maxWaiting = 4 * maxBatch,
  ) {}

  /** How many wait on the line, not counting the batch in flight. */
  waiting(lane: string): number {
    return this.lanes.get(lane)?.waiting.length ?? 0;
  }

  /** The batch in flight on the line, if any. */
  inFlight(lane: string): readonly W[] {
    return this.lanes.get(lane)?.inFlight ?? [];
  }

  /** Whether the line is full: one more would wait behind several round trips only to add to a queue that keeps growing. */
  full(lane: string): boolean {
    return this.waiting(lane) >= this.maxWaiting;
  }

  /**
   * Puts `waiter` at the end of its line at `now`, and returns the batch to send at once: when none
   * is in flight, or the one in flight was handed out more than `stallMs` ago (its sender was
   * presumably lost; the stalled batch then hands nothing on when it ends).
   */
  join(lane: string, waiter: W, now: number, stallMs: number): W[] | undefined {
    let line = this.lanes.get(lane);
    if (!line) this.lanes.set(lane, (line = { waiting: [], inFlight: null, progressAt: 0 }));
    line.waiting.push(waiter);
    return !line.inFlight || now - line.progressAt > stallMs ? this.handOut(lane, line, now) : undefined;
  }

  /** Takes `waiter` out of its line, when its time ran out before a batch took it; false when a batch had taken it. */
  leave(lane: string, waiter: W): boolean {
    const waiting = this.lanes.get(lane)?.waiting;
    const at = waiting?.indexOf(waiter) ?? -1;
    if (at !== -1) waiting!.splice(at, 1);
    return at !== -1;
  }

  /**
   * A batch's call ended at `now`. For the line's current batch: an overloaded object takes the
   * line's waiters down with it (`failed`: their rules' onError answers them at once rather than
   * adding to the overload), and the next batch is handed out (`next`), or the line retires when
   * nobody waits. A batch given up on as stalled hands nothing on: its replacement does.
   */
  ended(lane: string, batch: W[], overloaded: boolean, now: number): { failed: W[]; next: W[] | undefined } {
    const line = this.lanes.get(lane);
    if (line?.inFlight !== batch) return { failed: [], next: undefined };
    const failed = overloaded ? line.waiting.splice(0) : [];
    return { failed, next: this.handOut(lane, line, now) };
  }

  private handOut(lane: string, line: Lane<W>, now: number): W[] | undefined {
    if (line.waiting.length === 0) {
      this.lanes.delete(lane);
      return undefined;
    }
    const batch = line.waiting.splice(0, this.maxBatch);
    line.inFlight = batch;
    line.progressAt = now;
    return batch;
  }
}
