/** Waiting for a key to admit a request (Upstash's `blockUntilReady`): `limit` again once a denial's wait is over, while that falls within a deadline. */
import { largestCost } from "../algorithms";
import type { Rule } from "../config/types";
import { sleep } from "./hold";
import { limitKey, type Held, type LimiterContext } from "./index";

/**
 * Decides `cost` units for `key` as `limitKey` does; a denial whose `retryAfter` ends within
 * `timeoutMs` of the call is waited out (a timer: no CPU spent) and asked again, as often as the
 * deadline allows; so is a gcra hold that ends within it. Answers with the admission, or at once
 * with a denial that could not pass in time: a wait or a hold past the deadline, a cost the rule
 * can never grant. A dry-run rule's would-be denial passes, as from `limit`. If `signal` aborts
 * while waiting, rejects with its reason, holding nothing.
 */
export async function limitWithin(context: LimiterContext, rule: Rule, key: string, cost: number, timeoutMs: number, signal?: AbortSignal): Promise<Held> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // A gcra hold is a wait too: one that would end past the deadline is a denial.
    const held = await limitKey(context, rule, key, cost, signal, deadline);
    const { decision } = held;
    // A cost the rule can never grant is told so only once no block hides it: answered at once, not after the block.
    if (decision.allowed || rule.dryRun || cost > largestCost(held.rule)) return held;
    const wait = Math.max(1, decision.retryAfter);
    if (Date.now() + wait > deadline) return held;
    if (!(await sleep(wait, signal))) throw signal!.reason;
  }
}
