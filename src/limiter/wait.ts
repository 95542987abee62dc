/** Waiting for a key to admit a request (Upstash's `blockUntilReady`): `limit` again once a denial's wait is over, while that falls within a deadline. */
import { largestCost, type Decision } from "../algorithms";
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
    let wait = 0;
    // Decided once, where the decision is counted: a denial waited out is not an answer, and is not counted.
    // A cost the rule can never grant is told so only once no block hides it: answered at once, not after the block.
    const waitsOut = (decision: Decision, asked: Rule) => {
      const ms = decision.allowed || rule.dryRun || cost > largestCost(asked) ? 0 : Math.max(1, decision.retryAfter);
      wait = ms > 0 && Date.now() + ms <= deadline ? ms : 0;
      return wait > 0;
    };
    // A gcra hold is a wait too: one that would end past the deadline is a denial.
    const held = await limitKey(context, rule, key, cost, signal, deadline, waitsOut);
    if (wait === 0) return held;
    if (!(await sleep(wait, signal))) throw signal!.reason;
  }
}
