/** What every simulated isolate shares, strict or fast: who it is, where it runs, how far from the object, how it reaches it, and how a request ends. */
import type { Decision } from "../../src/algorithms";
import type { Rule } from "../../src/config/types";
import { LruTable } from "../../src/fast/table";
import { decideShare, type Counters, type Share } from "../../src/limiter/local-share";
import { policyOf } from "../../src/config/policy";
import type { Clock } from "./clock";
import type { Call, Reply } from "./object";

/**
 * Why a fast request waited on a call: its isolate had not yet heard from the key's object
 * (`first`: no call answered yet); its lease ended holding units (`expired`); a call was already on
 * its way when the lease ran dry: an early top-up (`behindTopUp`), the booked call
 * (`behindBookedCall`), another waiting request's (`behindWait`) or a release (`behindRelease`);
 * or the lease was spent with no call on its way, before the booked time (`spentBeforeBooked`: no
 * early top-up started) or after it (`spentAfterBooked`: the booked call was left to a request).
 */
export const WAIT_CAUSES = ["first", "expired", "behindTopUp", "behindBookedCall", "behindWait", "behindRelease", "spentBeforeBooked", "spentAfterBooked"] as const;
export type WaitCause = (typeof WAIT_CAUSES)[number];

/** How a request ended: its decision (null: the isolate vanished first), whether it waited on a call (and why, in fast mode), and the error onError answered for (`queueFull`: a strict key's queue in the isolate, or a relay's queue, was full). */
export interface Outcome {
  decision: Decision | null;
  waited: boolean;
  cause?: WaitCause;
  error?: "timeout" | "overloaded" | "unavailable" | "queueFull" | "reset";
}

export type Done = (outcome: Outcome) => void;

/** The network and the objects, as an isolate reaches them. */
export interface Link {
  clock: Clock;
  /** Sends one call to the named object (a relay when it carries `relay`); `onReply` runs when the answer is back here, and never if the isolate vanished first. */
  call(from: IsolateBase, objectName: string, payload: Pick<Call, "sync" | "relay" | "kind" | "costs">, onReply: (reply: Reply) => void): void;
}

export abstract class IsolateBase {
  alive = true;
  /** object calls this isolate made */
  calls = 0;
  /** the local fallback of src/limiter/on-error.ts: one per isolate, as its module-level table is */
  private readonly fallback = new LruTable<Counters>(10_000, () => undefined);

  constructor(
    readonly id: string,
    /** the Cloudflare location serving its requests (`request.cf.colo`) */
    readonly location: string,
    /** that location's continent (`request.cf.continent`) */
    readonly continent: string,
    /** its round trip to the key's object */
    readonly rttMs: number,
    protected readonly link: Link,
  ) {}

  abstract request(rule: Rule, objectName: string, cost: number, done: Done): void;

  /** The isolate vanishes: it answers nothing more, and what it held is lost with it. */
  vanish(): void {
    this.alive = false;
  }

  /**
   * src/limiter/on-error.ts `onErrorDecision` for the default `onError: "local"`: its
   * share's arithmetic is floodgate's own `decideShare`; the counters it keeps are module state
   * there (one table per isolate), so they are kept per isolate here.
   */
  protected onError(rule: Rule, objectName: string, cost: number, known: Share, now: number): Decision {
    const outcome = decideShare(policyOf(rule), this.fallback.get(objectName), cost, known, now);
    if (!outcome) return { allowed: false, limit: rule.limit, remaining: 0, resetAt: now + 1_000, moreAt: now + 1_000, retryAfter: 1_000, reason: "error" };
    this.fallback.set(objectName, outcome.counters);
    return { ...outcome.decision, limit: rule.limit, reason: "error" };
  }
}
