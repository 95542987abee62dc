/** Coalesces concurrent strict decisions for one Durable Object into ordered batches, one call in flight each. */
import type { Policy } from "../algorithms";
import type { Decided } from "../durable-object/rate-limiter";
import { TimeoutError } from "./timeout";

/** Sends one batch of costs to the named object and returns its decisions in the same order. */
export type BatchCall = (name: string, policy: Policy, costs: number[]) => Promise<Decided[]>;

interface Waiter {
  cost: number;
  resolve(decided: Decided): void;
  reject(error: unknown): void;
}

interface Lane {
  waiting: Waiter[];
  /** a drain is running; `progressAt` is when it last sent a batch */
  busy: boolean;
  progressAt: number;
}

/** The request handing a batch to the object, and keeping that work alive past its own response. */
export interface BatchContext {
  timeoutMs: number;
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * As gubernator batches hits for one key: the first request for an idle object calls it at once;
 * requests that arrive while that call is in flight wait and go together in the next call, which the
 * object still decides one by one, in arrival order. Under load this turns N calls into a few, and
 * with no load it adds nothing.
 *
 * Workers ties work to the request that started it, so the request that starts a drain hands it to
 * `waitUntil`: the batches go on even when that request is answered or its client hangs up. A
 * waiter that runs out of time leaves the queue (and is decided by the rule's onError policy); a
 * drain that stops making progress, as when its request was cancelled, is replaced by the next
 * request that arrives.
 */
export class Coalescer {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly maxBatch = 128) {}

  /** Decides one request of `cost` units at the named object, batched with its concurrent peers. */
  decide(call: BatchCall, name: string, policy: Policy, cost: number, context: BatchContext): Promise<Decided> {
    const laneKey = `${name}\n${policy.algorithm}:${policy.limit}:${policy.periodMs}:${policy.burst}:${policy.buckets}:${policy.delay ?? ""}:${policy.blockMs ?? 0}`;
    let lane = this.lanes.get(laneKey);
    if (!lane) this.lanes.set(laneKey, (lane = { waiting: [], busy: false, progressAt: 0 }));
    const queue = lane;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const decided = new Promise<Decided>((resolve, reject) => {
      const waiter: Waiter = { cost, resolve, reject };
      queue.waiting.push(waiter);
      // The timer also keeps this request alive while it waits on I/O another request started.
      timer = setTimeout(() => {
        const at = queue.waiting.indexOf(waiter);
        if (at !== -1) queue.waiting.splice(at, 1);
        reject(new TimeoutError(`no decision within ${context.timeoutMs}ms`));
      }, context.timeoutMs);
    }).finally(() => clearTimeout(timer!));
    const now = Date.now();
    if (!queue.busy || now - queue.progressAt > 2 * context.timeoutMs) {
      queue.busy = true;
      queue.progressAt = now;
      context.waitUntil(this.drain(call, name, policy, laneKey, queue));
    }
    return decided;
  }

  /** Sends batches until nobody waits; a failed call fails its own batch only. */
  private async drain(call: BatchCall, name: string, policy: Policy, laneKey: string, lane: Lane): Promise<void> {
    try {
      while (lane.waiting.length > 0) {
        const batch = lane.waiting.splice(0, this.maxBatch);
        lane.progressAt = Date.now();
        try {
          const results = await call(name, policy, batch.map((w) => w.cost));
          batch.forEach((waiter, i) => waiter.resolve(results[i]!));
        } catch (error) {
          for (const waiter of batch) waiter.reject(error);
        }
      }
    } finally {
      lane.busy = false;
      if (lane.waiting.length === 0 && this.lanes.get(laneKey) === lane) this.lanes.delete(laneKey);
    }
  }
}
