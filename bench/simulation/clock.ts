/** The simulated clock: a deterministic event queue, a FIFO of deadlines, and "soon" work that runs before time moves on. */

/** The traffic as the clock sees it: when the next request arrives, and how to handle it. */
export interface Arrivals {
  next: number;
  arrive(): void;
}

/** One scheduled event: `run` is called with the clock at `at`; `seq` breaks ties in scheduling order. */
interface Scheduled {
  at: number;
  seq: number;
  run: () => void;
}

/**
 * A discrete-event clock. Three sources of work, taken in time order (ties: events, then
 * deadlines, then arrivals, each in the order they were scheduled):
 *
 * - events: a binary heap of anything scheduled for a time (network legs, the object finishing a call);
 * - deadlines: a FIFO, since every deadline is `now + the rule's timeout` and the clock only rises,
 *   so deadlines are added in time order and need no heap (a request waiting on the object times
 *   out through one; most are cancelled, which costs nothing);
 * - one arrival at a time from the traffic generator, which schedules the next when it runs.
 *
 * `soon(fn)` queues work to run after the current event and before the clock moves: what a resolved
 * promise's continuations are to the code the simulation mirrors.
 */
export class Clock {
  now: number;
  private readonly heap: Scheduled[] = [];
  private seq = 0;
  private readonly deadlineAt: number[] = [];
  private readonly deadlineRun: (() => void)[] = [];
  private deadlineHead = 0;
  private readonly microtasks: (() => void)[] = [];
  /** events run, for the report */
  events = 0;

  constructor(start: number) {
    this.now = start;
  }

  at(time: number, run: () => void): void {
    const event: Scheduled = { at: Math.max(time, this.now), seq: this.seq++, run };
    const heap = this.heap;
    let i = heap.length;
    heap.push(event);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(event, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = event;
  }

  after(delay: number, run: () => void): void {
    this.at(this.now + delay, run);
  }

  /** Runs `run` at `time`; `time` must not be earlier than any deadline already set (true of now + a fixed timeout). */
  deadline(time: number, run: () => void): void {
    const last = this.deadlineAt.length > this.deadlineHead ? this.deadlineAt[this.deadlineAt.length - 1]! : -Infinity;
    if (time < last) throw new Error(`deadlines must be set in time order (${time} < ${last})`);
    this.deadlineAt.push(time);
    this.deadlineRun.push(run);
  }

  soon(run: () => void): void {
    this.microtasks.push(run);
  }

  /**
   * Runs everything due up to `until` (inclusive). `arrivals.next` is the traffic's next arrival
   * time (Infinity when there is none); `arrivals.arrive()` handles it and moves `next` on.
   */
  run(until: number, arrivals: Arrivals): void {
    for (;;) {
      const arrival = arrivals.next;
      const event = this.heap[0];
      const eventAt = event ? event.at : Infinity;
      const deadlineAt = this.deadlineHead < this.deadlineAt.length ? this.deadlineAt[this.deadlineHead]! : Infinity;
      const next = Math.min(eventAt, deadlineAt, arrival);
      if (next > until || next === Infinity) break;
      this.now = next;
      this.events++;
      if (eventAt === next) {
        this.pop();
        event!.run();
      } else if (deadlineAt === next) {
        const run = this.deadlineRun[this.deadlineHead]!;
        this.deadlineHead++;
        if (this.deadlineHead > 4096 && this.deadlineHead * 2 > this.deadlineAt.length) this.compactDeadlines();
        run();
      } else {
        arrivals.arrive();
      }
      this.drainSoon();
    }
  }

  private drainSoon(): void {
    // Work queued by work queued here runs too, in order, before the clock moves.
    for (let i = 0; i < this.microtasks.length; i++) this.microtasks[i]!();
    this.microtasks.length = 0;
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    let i = 0;
    const n = heap.length;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && before(heap[right]!, heap[left]!) ? right : left;
      if (!before(heap[child]!, last)) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
  }

  private compactDeadlines(): void {
    this.deadlineAt.splice(0, this.deadlineHead);
    this.deadlineRun.splice(0, this.deadlineHead);
    this.deadlineHead = 0;
  }
}

function before(a: Scheduled, b: Scheduled): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** A 32-bit FNV-1a hash of a string: scenario names and key names become seeds and homes. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
