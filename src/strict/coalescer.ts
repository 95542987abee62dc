/** Coalesces concurrent strict decisions for one Durable Object into ordered batches, one call in flight each. */
import type { Policy } from "../algorithms";
import type { Decided } from "../durable-object/rate-limiter";

/** Sends one batch of costs to the named object and returns its decisions in the same order. */
export type BatchCall = (name: string, policy: Policy, costs: number[]) => Promise<Decided[]>;

type Turn = { lead: Waiter[] } | { decided: Decided };

interface Waiter {
  cost: number;
  resolve(turn: Turn): void;
  reject(error: unknown): void;
}

interface Lane {
  busy: boolean;
  waiting: Waiter[];
}

/**
 * As gubernator batches hits for one key: the first request for an idle object calls it at once;
 * requests that arrive while that call is in flight wait and go together in the next call, which the
 * object still decides one by one, in arrival order. Under load this turns N calls into a few, and
 * with no load it adds nothing.
 *
 * The batch is sent by one of its own requests (the first), so the call runs in a live request's
 * context: Workers cancels I/O that belongs to a request which has finished.
 */
export class Coalescer {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly maxBatch = 128) {}

  /** Decides one request of `cost` units at the named object, batched with its concurrent peers. */
  async decide(call: BatchCall, name: string, policy: Policy, cost: number): Promise<Decided> {
    const laneKey = `${name}\n${policy.algorithm}:${policy.limit}:${policy.periodMs}:${policy.burst}:${policy.buckets}`;
    let lane = this.lanes.get(laneKey);
    if (!lane) this.lanes.set(laneKey, (lane = { busy: false, waiting: [] }));
    const turn = new Promise<Turn>((resolve, reject) => lane.waiting.push({ cost, resolve, reject }));
    if (!lane.busy) this.promote(laneKey, lane);
    const mine = await turn;
    if ("decided" in mine) return mine.decided;
    try {
      const results = await call(name, policy, mine.lead.map((w) => w.cost));
      mine.lead.forEach((waiter, i) => i > 0 && waiter.resolve({ decided: results[i]! }));
      return results[0]!;
    } catch (error) {
      mine.lead.slice(1).forEach((waiter) => waiter.reject(error));
      throw error;
    } finally {
      this.promote(laneKey, lane);
    }
  }

  /** Hands the next batch to its first waiter, or retires the lane when nobody waits. */
  private promote(laneKey: string, lane: Lane): void {
    const batch = lane.waiting.splice(0, this.maxBatch);
    lane.busy = batch.length > 0;
    if (!lane.busy) {
      this.lanes.delete(laneKey);
      return;
    }
    batch[0]!.resolve({ lead: batch });
  }
}
