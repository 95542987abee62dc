/** Strict keys their object just denied: the isolate denies the same request again, with no call, until the object's retryAfter. */
import { costlierUntil, type Decision, type Policy } from "../algorithms";
import { LruTable } from "../fast/table";

/** Denied keys one isolate remembers; the least recently used is forgotten first. */
const MAX_DENIALS = 10_000;

interface Denial {
  decision: Decision;
  /** the cost that was denied: a cheaper request may still fit, so only this much or more is denied here */
  cost: number;
  until: number;
  /** the policy it was decided under, which says how much longer a costlier request waits */
  policy: Policy;
}

/**
 * The object's `retryAfter` is the shortest wait before that same request could be admitted if
 * nothing else arrived. Until then, it and any costlier one are denied in the isolate: a refund
 * or a reset in between can only make this deny early, never admit over the limit.
 */
export class DenialCache {
  private readonly table = new LruTable<Denial>(MAX_DENIALS, () => undefined);

  /** Remembers a denial at the limit or a block, made under `policy`; a cost over the capacity or an error says nothing about other requests. */
  remember(objectName: string, cost: number, decision: Decision, now: number, policy: Policy): void {
    if (decision.allowed || decision.retryAfter <= 0) return;
    const until = now + decision.retryAfter;
    // A block denies every request, whatever it costs, until it ends.
    if (decision.reason === "blocked") this.table.set(objectName, { decision, cost: 1, until, policy });
    else if (decision.reason === "limit") this.table.set(objectName, { decision, cost, until, policy });
  }

  /** The remembered denial of a request of `cost` at `now`, its wait counted down; undefined when none holds. */
  lookup(objectName: string, cost: number, now: number): Decision | undefined {
    const denial = this.table.peek(objectName);
    if (denial === undefined) return undefined;
    if (now >= denial.until) {
      this.table.delete(objectName);
      return undefined;
    }
    if (cost < denial.cost) return undefined;
    // The object's figures at its denial: units may have come back since, which only the object can tell.
    const moreAt = Math.max(now, denial.decision.moreAt);
    const until = cost > denial.cost && denial.decision.reason !== "blocked" ? costlierUntil(denial.policy, denial.decision, denial.cost, cost, denial.until) : denial.until;
    // A block is what holds the key, remembered or not: it says so, as a fast key's does.
    const reason = denial.decision.reason === "blocked" ? "blocked" : "cache";
    return { ...denial.decision, moreAt, resetAt: Math.max(now, denial.decision.resetAt), retryAfter: until - now, reason };
  }

  /** Whether the denial remembered for the key is a block: it denies any request, whatever it costs. */
  blocks(objectName: string): boolean {
    return this.table.peek(objectName)?.decision.reason === "blocked";
  }

  forget(objectName: string): void {
    this.table.delete(objectName);
  }
}
