/** Coalesces concurrent strict decisions for one Durable Object into ordered batches, one call in flight each. */
import type { Policy } from "../algorithms";
import { objectErrorKind } from "../durable-object/errors";
import type { Decided } from "../durable-object/rate-limiter";
import { Lanes, laneOf } from "./lanes";
import { handedBy, TimeoutError, type Handed } from "./timeout";

/** Sends one batch of costs to the named object and returns its decisions in the same order. */
export type BatchCall = (name: string, policy: Policy, costs: number[]) => Promise<Decided[]>;

interface Waiter {
  cost: number;
  /** its batch's outcome for it, set by whichever request sent the batch; read by this request's own code (see {@link handedBy}) */
  outcome?: Handed<Decided>;
  /** tells this request its outcome is set, sooner than its deadline */
  wake(): void;
  /** Hands this request a batch to send under its own invocation; an empty one releases it. */
  lead(batch: Waiter[]): void;
  /** set once its time ran out: its rule's onError answered it, and the object's decision, if it comes, is late */
  expired: boolean;
  late: BatchContext["late"];
  turnedAway: BatchContext["turnedAway"];
}

/**
 * A request turned away because its key already has a full queue in this isolate: its rule's
 * onError answers it at once, rather than after its timeout.
 */
export class QueueFullError extends Error {
  override readonly name = "QueueFullError";
}

/** A request's invocation: its time budget, and the `waitUntil` that keeps its work alive past its response. */
export interface BatchContext {
  timeoutMs: number;
  waitUntil(promise: Promise<unknown>): void;
  /** what to do with the object's decision when it comes after the request stopped waiting; never rejects */
  late?(decided: Decided): Promise<void>;
  /** told, before its error, that a failed call turned the request out of its line unsent (see {@link Lanes.ended}): its object never decides it */
  turnedAway?(): void;
}

/**
 * As gubernator batches hits for one key: the first request for an idle object calls it at once;
 * requests that arrive while that call is in flight wait and go together in the next call, which the
 * object still decides one by one, in arrival order. Under load this turns N calls into a few, and
 * with no load it adds nothing.
 *
 * Workers ties work to the request that started it, and counts its subrequests against it. So each
 * batch is sent by a request in it (the newest, which has the most of its time left), under that
 * request's own `waitUntil`: a request makes at most one call per key however long the key stays
 * hot, and every call is made for a request still waiting on it. (A loop draining the queue in the
 * first request's `waitUntil` would outlive the 30 s Cloudflare grants it, and count a hot key's
 * every call against that one request's subrequest limit.) A waiter that runs out of time leaves
 * the queue (and is decided by the rule's onError policy); a batch that stops making progress, as
 * when its sender was cancelled, is replaced by the next request that arrives. At most `maxWaiting`
 * requests wait per key: past that, requests arrive faster than full batches can carry them, and
 * one more would wait behind several round trips (at a slow object, its whole timeout) only to add
 * to a queue that keeps growing, so it is rejected at once with a {@link QueueFullError}.
 */
export class Coalescer {
  private readonly lanes: Lanes<Waiter>;

  constructor(maxBatch?: number, maxWaiting?: number) {
    this.lanes = new Lanes(maxBatch, maxWaiting);
  }

  /** Units of the requests in the batch in flight to the named object that still wait on it: the object may admit each in time. */
  pendingUnits(name: string, policy: Policy): number {
    return this.lanes.inFlight(laneOf(name, policy)).reduce((sum, waiter) => sum + (waiter.expired ? 0 : waiter.cost), 0);
  }

  /** Decides one request of `cost` units at the named object, batched with its concurrent peers. */
  decide(call: BatchCall, name: string, policy: Policy, cost: number, context: BatchContext): Promise<Decided> {
    const lane = laneOf(name, policy);
    if (this.lanes.full(lane)) return Promise.reject(new QueueFullError(`${this.lanes.waiting(lane)} requests already wait on this key`));
    let lead!: (batch: Waiter[]) => void;
    const led = new Promise<Waiter[]>((resolve) => (lead = resolve));
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const waiter: Waiter = { cost, wake, lead, expired: false, late: context.late, turnedAway: context.turnedAway };
    const batch = this.lanes.join(lane, waiter, Date.now(), 2 * context.timeoutMs);
    // The decision is settled here, never by the request that sent the batch; the deadline also
    // keeps this request alive until its hand-off (a batch to send, or none) has reached it, which
    // another request may settle, as it reaches this one only a moment later.
    const { answer, cancel } = handedBy(context.timeoutMs, woken, () => waiter.outcome, () => {
      waiter.expired = true;
      return new TimeoutError(`no decision within ${context.timeoutMs}ms`, this.lanes.leave(lane, waiter));
    });
    let seen = 0;
    const reached = () => {
      if (++seen === 2) cancel();
    };
    // Registered now, from this request's own invocation, so that a batch handed to it is sent there.
    context.waitUntil(
      led.then((batch) => {
        reached();
        return this.send(call, name, policy, lane, batch);
      }),
    );
    const decided = answer.finally(() => {
      reached();
      lead([]);
    });
    batch?.at(-1)!.lead(batch);
    return decided;
  }

  /**
   * Sends one batch and hands the next to its newest request. A failed call fails its own batch
   * only, except that an overloaded object also fails the requests queued behind it (see {@link Lanes.ended}).
   * The decisions of requests that stopped waiting meanwhile go to their `late`, under this invocation.
   */
  private async send(call: BatchCall, name: string, policy: Policy, lane: string, batch: Waiter[]): Promise<void> {
    if (batch.length === 0) return;
    let next: Waiter[] | undefined;
    const late: Promise<void>[] = [];
    try {
      const results = await call(name, policy, batch.map((w) => w.cost));
      for (const [i, waiter] of batch.entries()) {
        if (!waiter.expired) hand(waiter, { value: results[i]! });
        else if (waiter.late) late.push(waiter.late(results[i]!));
      }
      next = this.lanes.ended(lane, batch, false, Date.now()).next;
    } catch (error) {
      const ended = this.lanes.ended(lane, batch, objectErrorKind(error) === "overloaded", Date.now());
      for (const waiter of ended.failed) waiter.turnedAway?.();
      for (const waiter of [...batch, ...ended.failed]) if (!waiter.expired) hand(waiter, { error });
      next = ended.next;
    }
    next?.at(-1)!.lead(next);
    await Promise.all(late);
  }
}

/** Gives a waiter its outcome, for its own code to settle its request with. */
function hand(waiter: Waiter, outcome: Handed<Decided>): void {
  waiter.outcome = outcome;
  waiter.wake();
}
