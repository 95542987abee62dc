/** A rule's `count`: once a request's response is known, gives back what it took under each rule that does not count such a response. */
import type { Count } from "../config/types";
import { giveBack, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Tells the rules how the request ended: its response's HTTP status (a status below 400 is a
 * success), or true or false for whether it succeeded. A rule counting only failed requests gives
 * back what a success took, one counting only successes what a failure took. Resolves once they
 * are back; only the first call does anything.
 */
export type Settle = (outcome: number | boolean) => Promise<void>;

/**
 * `{ settle }` when a rule that counts by response (`count` other than "all") admitted the request,
 * otherwise `{}`: every other rule's units stay spent. A request never settled stays counted.
 */
export function settleOf(taken: readonly { ask: Ask; taken: Taken }[], context: LimiterContext): { settle?: Settle } {
  const judged = taken.filter((t) => t.ask.rule.count !== "all" && t.taken.decision.allowed);
  if (judged.length === 0) return {};
  let settled: Promise<void> | undefined;
  const settle: Settle = async (outcome) => {
    const succeeded = succeededBy(outcome);
    return (settled ??= Promise.all(judged.filter((t) => !counts(t.ask.rule.count, succeeded)).map((t) => giveBack(t.ask, t.taken, context))).then(() => undefined));
  };
  return { settle };
}

/** Whether a rule that counts `count` keeps a request that ended so counted. */
function counts(count: Count, succeeded: boolean): boolean {
  return count === "all" || (count === "failed") !== succeeded;
}

/** An outcome as success or failure: a status below 400 succeeded. Anything but a status or a boolean is the caller's mistake. */
function succeededBy(outcome: unknown): boolean {
  if (typeof outcome === "boolean") return outcome;
  if (Number.isInteger(outcome) && (outcome as number) >= 100 && (outcome as number) <= 599) return (outcome as number) < 400;
  throw new TypeError(`settle: expected the response's HTTP status (100 to 599) or whether the request succeeded (true or false), got ${JSON.stringify(outcome) ?? typeof outcome}`);
}
