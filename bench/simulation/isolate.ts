/** What every simulated isolate shares, strict or fast: who it is, how far from the object, how it reaches it, and how a request ends. */
import { decide, type Decision, type LimiterState } from "../../src/algorithms";
import type { Rule } from "../../src/config/types";
import type { SyncRequest } from "../../src/fast/lease";
import { LruTable } from "../../src/fast/table";
import { policyOf } from "./policy";
import type { Clock } from "./clock";
import type { CallKind, Reply } from "./object";

/** How a request ended: its decision (null: the isolate vanished first), whether it waited on a call, and the error onError answered for. */
export interface Outcome {
  decision: Decision | null;
  waited: boolean;
  error?: "timeout" | "overloaded" | "unavailable";
}

export type Done = (outcome: Outcome) => void;

/** The network and the objects, as an isolate reaches them. */
export interface Link {
  clock: Clock;
  /** Sends one call to the named object; `onReply` runs when the answer is back here, and never if the isolate vanished first. */
  call(from: IsolateBase, objectName: string, payload: { sync?: SyncRequest; kind?: CallKind; costs?: number[] }, onReply: (reply: Reply) => void): void;
}

export abstract class IsolateBase {
  alive = true;
  /** object calls this isolate made */
  calls = 0;
  /** the local fallback of src/limiter/on-error.ts: one per isolate, as its module-level table is */
  private readonly fallback = new LruTable<LimiterState>(10_000, () => undefined);

  constructor(
    readonly id: string,
    readonly rttMs: number,
    protected readonly link: Link,
  ) {}

  abstract request(rule: Rule, objectName: string, cost: number, done: Done): void;

  /** The isolate vanishes: it answers nothing more, and what it held is lost with it. */
  vanish(): void {
    this.alive = false;
  }

  /**
   * src/limiter/on-error.ts `onErrorDecision` (lines 23–29) for the default `onError: "local"`: the
   * rule's limit split among the isolates the object last counted, from this isolate's own counter.
   * Its table is module state there (one per isolate), so it is kept per isolate here.
   */
  protected onError(rule: Rule, objectName: string, cost: number, peers: number, now: number): Decision {
    const policy = policyOf(rule);
    const share = { ...policy, limit: Math.max(1, Math.floor(policy.limit / peers)), burst: policy.algorithm === "gcra" ? Math.floor(policy.burst / peers) : Math.max(1, Math.floor(policy.burst / peers)) };
    const outcome = decide(share, this.fallback.get(objectName), cost, now);
    this.fallback.set(objectName, outcome.state);
    return { ...outcome.decision, limit: rule.limit, reason: "error" };
  }
}
