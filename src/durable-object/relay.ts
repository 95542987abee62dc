/** The relay side of a RateLimiter named for a location: it forwards that location's syncs for one key in batches. */
import type { Env } from "../env";
import type { Lease } from "../fast/lease";
import { MAX_RELAY_GAP_MS, RELAY_HOLD_MS, RelayQueue, relayDeadline, type Forwarded, type Relayed } from "../fast/relay";
import { metrics } from "../metrics/metrics";
import { withTimeout } from "../strict/timeout";
import { objectErrorKind, retriedOnce } from "./errors";
import { limiterStub } from "./stub";

export class RelayFullError extends Error {
  override readonly name = "RelayFullError";
}

interface Waiter extends Forwarded {
  timeoutMs: number;
  resolve(lease: Lease): void;
  reject(error: unknown): void;
}

interface Lane {
  queue: RelayQueue<Waiter>;
  timer: ReturnType<typeof setTimeout> | null;
}

/**
 * Holds, per key's object, the syncs waiting and the timer of the next batch (a relay object is
 * named for one key, so it has one lane; it is kept, with when its last batch left). Nothing here is
 * stored: a relay that restarts loses only the syncs in flight, which their isolates resend (the
 * key's object answers a resent sync without applying it twice).
 */
export class Relay {
  private readonly lanes = new Map<string, Lane>();
  /** names this relay to the keys' objects, which pace their relays (made here: Workers allows no random values at module scope) */
  private readonly id = crypto.randomUUID();

  constructor(private readonly namespace: Env["LIMITER"]) {}

  /** Forwards one isolate's sync to `objectName` with the others waiting, and answers with its lease. */
  forward(objectName: string, forwarded: Forwarded, timeoutMs: number): Promise<Lease> {
    let lane = this.lanes.get(objectName);
    if (!lane) this.lanes.set(objectName, (lane = { queue: new RelayQueue(), timer: null }));
    const waiting = lane.queue;
    return new Promise<Lease>((resolve, reject) => {
      if (!waiting.add({ ...forwarded, timeoutMs, resolve, reject }, relayDeadline(Date.now(), timeoutMs))) {
        // The object's name holds the key, which no error message may carry into a log line.
        reject(new RelayFullError(`${waiting.size} syncs already wait for this key at this relay`));
        return;
      }
      this.pump(objectName, lane);
    });
  }

  /** Sends the next batch when it is due, or sets the timer for when it will be. */
  private pump(objectName: string, lane: Lane): void {
    if (lane.timer) return;
    const due = lane.queue.dueAt();
    if (due === undefined) return;
    const now = Date.now();
    if (due > now) {
      lane.timer = setTimeout(() => {
        lane.timer = null;
        this.pump(objectName, lane);
      }, due - now);
      return;
    }
    const batch = lane.queue.take(now);
    void this.send(objectName, batch).then((gapMs) => {
      lane.queue.settled(gapMs);
      this.pump(objectName, lane);
    });
  }

  /**
   * One call for the whole batch, bounded by the longest timeout among its isolates' rules, which
   * resolves with the gap the key's object asks for (undefined when the call failed). The syncs are
   * idempotent, so a fault Cloudflare marks retryable is retried once; an overloaded object is not,
   * and the relay then keeps the longest gap. A batch that timed out may still reach the key's
   * object: the next waits for its answer (at most RELAY_HOLD_MS), whose leases are dropped (their
   * isolates resend the same syncs, answered without being applied twice).
   */
  private async send(objectName: string, batch: Waiter[]): Promise<number | undefined> {
    const stub = limiterStub(this.namespace, objectName);
    const items = batch.map(({ policy, request }) => ({ policy, request }));
    const call = (): Promise<Relayed> => {
      metrics.count("floodgate_durable_object_calls_total", { method: "syncAll" });
      return stub.syncAll(this.id, items);
    };
    const reply = retriedOnce(call);
    try {
      const { answers, gapMs } = await withTimeout(reply, Math.max(...batch.map((w) => w.timeoutMs)));
      batch.forEach((w, i) => {
        const answer = answers[i]!;
        if ("error" in answer) w.reject(new Error(answer.error));
        else w.resolve(answer);
      });
      return gapMs;
    } catch (error) {
      const told = retried(error);
      for (const w of batch) w.reject(told);
    }
    const gap = reply.then(
      (late) => late.gapMs,
      (error: unknown) => (objectErrorKind(error) === "overloaded" ? MAX_RELAY_GAP_MS : undefined),
    );
    return withTimeout(gap, RELAY_HOLD_MS).catch(() => undefined);
  }
}

/**
 * The batch's error as its isolates are told it: a fault marked retryable, which the relay already
 * retried, loses the mark, or each isolate retried its sync through the relay and a faulty key's
 * object took a third and fourth batch. Its message and an overloaded mark stay.
 */
function retried(error: unknown): unknown {
  return objectErrorKind(error) === "retryable" && error instanceof Error ? new Error(error.message) : error;
}
