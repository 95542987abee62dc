/**
 * A location's relay object for one key (`aggregate: "location"`): floodgate's own `RelayQueue`
 * (src/fast/relay.ts) on an object's thread, its `forward`, `pump` and `send` (src/durable-object/relay.ts,
 * which runs on timers, promises and `Date.now()`) mirrored on the simulated clock with their lines named.
 */
import type { Lease } from "../../src/fast/lease";
import { MAX_RELAY_GAP_MS, RELAY_HOLD_MS, RelayQueue, relayDeadline, type Forwarded } from "../../src/fast/relay";
import type { Clock } from "./clock";
import { ObjectThread, SERVICE, threadStats, type Call, type Reply, type Served, type ThreadStats } from "./object";

/** relay.ts `Waiter`: an isolate's sync, and where its answer goes. */
interface Waiter extends Forwarded {
  timeoutMs: number;
  reply(reply: Reply): void;
}

/** What the report reads from a relay, beyond its thread's counters. */
export interface RelayStats extends ThreadStats {
  batches: number;
  /** syncs its batches carried */
  forwarded: number;
  /** syncs refused at once because its queue was full (RelayFullError) */
  refused: number;
  /** batches that outlived their timeout */
  timedOut: number;
}

/** Sends one batch to the key's object (`syncAll`) over the network; `onReply` runs when the answer is back at the relay. */
export type SendBatch = (objectName: string, batch: Forwarded[], onReply: (reply: Reply) => void) => void;

/**
 * The relay object: each isolate's `relay` call costs its thread what any call costs (SERVICE.baseMs),
 * its answer included; sending a batch and handing out its answers ride on the calls and timers
 * around them and are not charged. It restarts now and then (see {@link reset}).
 */
export class RelayObject extends ObjectThread<RelayStats> {
  /** relay.ts keeps a lane per key's object; a relay object is named for one key, so it has one */
  private readonly waiting = new RelayQueue<Waiter>();
  private timer = false;
  /** the batch in flight: a restart fails its syncs too */
  private flying: Waiter[] = [];
  private gone = false;

  constructor(
    clock: Clock,
    steadyFrom: number,
    private readonly sendBatch: SendBatch,
  ) {
    super(clock, { ...threadStats(), batches: 0, forwarded: 0, refused: 0, timedOut: 0 }, steadyFrom);
  }

  /**
   * The relay restarts (its isolate evicted, or a deploy), holding nothing: relay.ts stores nothing,
   * so every sync waiting here, on its thread or for a batch or in the batch in flight, fails as
   * Cloudflare's reset does (retryable), and the answer of that batch is dropped when it comes. The
   * key's object has applied it: the isolates resend the same syncs, which it answers without
   * applying them twice. The next call for this location meets a fresh relay.
   */
  reset(): void {
    this.gone = true;
    const lost: Reply = { ok: false, error: "reset" };
    this.drain(lost);
    for (const w of this.flying) w.reply(lost);
    while (this.waiting.size > 0) for (const w of this.waiting.take(this.clock.now)) w.reply(lost);
  }

  /** relay.ts `forward`: queue the sync, or refuse it at once when the queue is full. */
  protected override serve(call: Call | "alarm"): Served {
    // A relay sets no alarm, so every call is an isolate's `relay`.
    const { relay, reply } = call as Call;
    const { objectName, forwarded, timeoutMs } = relay!;
    if (!this.waiting.add({ ...forwarded, timeoutMs, reply }, relayDeadline(this.clock.now, timeoutMs))) {
      this.stats.refused++;
      return { reply: { ok: false, error: "full" }, serviceMs: SERVICE.baseMs };
    }
    this.pump(objectName);
    return { serviceMs: SERVICE.baseMs };
  }

  /** relay.ts `pump`: send the next batch when it is due, or set the timer for when it will be. */
  private pump(objectName: string): void {
    if (this.timer) return;
    const due = this.waiting.dueAt();
    if (due === undefined) return;
    const now = this.clock.now;
    if (due > now) {
      this.timer = true;
      this.clock.at(due, () => {
        this.timer = false;
        this.pump(objectName);
      });
      return;
    }
    const batch = this.waiting.take(now);
    this.send(objectName, batch, (gapMs) => {
      this.waiting.settled(gapMs);
      this.pump(objectName);
    });
  }

  /**
   * relay.ts `send`: one `syncAll` for the batch, given up after the longest timeout
   * among its syncs (`withTimeout`), each sync answered with its own lease or every one with the
   * batch's error; the gap the key's object asked for paces the next batch. A batch that timed out
   * holds the relay until its answer is back (its leases dropped), at most RELAY_HOLD_MS; an
   * overloaded object's refusal leaves MAX_RELAY_GAP_MS before the next. The simulated object never
   * fails a call as retryable, so the one retry is not mirrored, and answers no sync with an error
   * of its own (see KeyObject `syncAll`).
   */
  private send(objectName: string, batch: Waiter[], settled: (gapMs: number | undefined) => void): void {
    this.stats.batches++;
    this.stats.forwarded += batch.length;
    let answered = false;
    let held = false;
    const release = (gapMs: number | undefined): void => {
      if (held) return;
      held = true;
      settled(gapMs);
    };
    this.flying = batch;
    const answer = (reply: Reply): void => {
      if (answered || this.gone) return;
      answered = true;
      this.flying = [];
      // The simulated object answers every sync with a lease (see KeyObject `syncAll`).
      batch.forEach((w, i) => w.reply(reply.ok ? { ok: true, lease: reply.relayed!.answers[i] as Lease } : reply));
    };
    this.sendBatch(objectName, batch.map(({ policy, request }) => ({ policy, request })), (reply) => {
      answer(reply);
      release(reply.ok ? reply.relayed!.gapMs : reply.error === "overloaded" ? MAX_RELAY_GAP_MS : undefined);
    });
    this.clock.after(Math.max(...batch.map((w) => w.timeoutMs)), () => {
      if (answered) return;
      this.stats.timedOut++;
      answer({ ok: false, error: "timeout" });
      this.clock.after(RELAY_HOLD_MS, () => release(undefined));
    });
  }
}
