/** The simulated clock: a deterministic event queue, a FIFO of deadlines, and "soon" work that runs before time moves on. */

/** The traffic as the clock sees it: when the next request arrives, and how to handle it. */
export interface Arrivals {
  next: number;
  arrive(): void;
}

/**
 * A discrete-event clock. Three sources of work, taken in time order (ties: events, then
 * deadlines, then arrivals, each in the order they were scheduled):
 *
 * - events: a binary heap of anything scheduled for a time (network legs, the object finishing a call),
 *   ties broken in scheduling order;
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
  // The heap as parallel arrays (each event's time, sequence number and work): no object per
  // event, and a comparison reads two numbers, not two events scattered over the heap.
  private times = new Float64Array(1_024);
  private seqs = new Float64Array(1_024);
  private readonly runs: ((() => void) | undefined)[] = [];
  private size = 0;
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
    const at = Math.max(time, this.now);
    const seq = this.seq++;
    if (this.size === this.times.length) this.grow();
    const { times, seqs, runs } = this;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(at, seq, times[parent]!, seqs[parent]!)) break;
      this.place(i, times[parent]!, seqs[parent]!, runs[parent]);
      i = parent;
    }
    this.place(i, at, seq, run);
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
      const eventAt = this.size > 0 ? this.times[0]! : Infinity;
      const deadlineAt = this.deadlineHead < this.deadlineAt.length ? this.deadlineAt[this.deadlineHead]! : Infinity;
      const next = Math.min(eventAt, deadlineAt, arrival);
      if (next > until || next === Infinity) break;
      this.now = next;
      this.events++;
      if (eventAt === next) {
        this.pop()();
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

  /** Takes the earliest event off the heap and returns its work. */
  private pop(): () => void {
    const { times, seqs, runs } = this;
    const first = runs[0]!;
    const n = --this.size;
    const at = times[n]!;
    const seq = seqs[n]!;
    const run = runs[n];
    runs[n] = undefined;
    if (n === 0) return first;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && before(times[right]!, seqs[right]!, times[left]!, seqs[left]!) ? right : left;
      if (!before(times[child]!, seqs[child]!, at, seq)) break;
      this.place(i, times[child]!, seqs[child]!, runs[child]);
      i = child;
    }
    this.place(i, at, seq, run);
    return first;
  }

  private place(i: number, at: number, seq: number, run: (() => void) | undefined): void {
    this.times[i] = at;
    this.seqs[i] = seq;
    this.runs[i] = run;
  }

  private grow(): void {
    const times = new Float64Array(this.times.length * 2);
    const seqs = new Float64Array(this.seqs.length * 2);
    times.set(this.times);
    seqs.set(this.seqs);
    this.times = times;
    this.seqs = seqs;
  }

  private compactDeadlines(): void {
    this.deadlineAt.splice(0, this.deadlineHead);
    this.deadlineRun.splice(0, this.deadlineHead);
    this.deadlineHead = 0;
  }
}

/** Whether the event at `at` scheduled `seq`th runs before the one at `otherAt` scheduled `otherSeq`th. */
function before(at: number, seq: number, otherAt: number, otherSeq: number): boolean {
  return at < otherAt || (at === otherAt && seq < otherSeq);
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
