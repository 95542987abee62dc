/**
 * PROTOTYPE (simulator only; nothing in src/ does this): an isolate that asks its location's
 * aggregator, a few ms away, for every decision, as gubernator's GLOBAL behaviour asks an owner in
 * its region. The aggregator runs floodgate's fast path (a FastIsolate) against the key's object,
 * so the object hears from one peer per location, however many isolates each has.
 */
import type { Rule } from "../../src/config/types";
import type { FastIsolate } from "./fast-isolate";
import { IsolateBase, type Done, type Link } from "./isolate";

/** A round trip between an isolate and its location's aggregator: the same data center (an assumption). */
export const COLO_RTT_MS = 2;

export class ColoIsolate extends IsolateBase {
  constructor(
    id: string,
    link: Link,
    private readonly aggregator: FastIsolate,
  ) {
    super(id, COLO_RTT_MS, link);
  }

  /** The decision is the aggregator's; a request that waited counts as waiting on the object only if the aggregator did. */
  request(rule: Rule, objectName: string, cost: number, done: Done): void {
    const clock = this.link.clock;
    clock.after(COLO_RTT_MS / 2, () =>
      this.aggregator.request(rule, objectName, cost, (outcome) =>
        clock.after(COLO_RTT_MS / 2, () => done(this.alive ? outcome : { ...outcome, decision: null })),
      ),
    );
  }
}
