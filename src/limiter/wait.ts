/** Waiting for a key to admit a request (Upstash's `blockUntilReady`): `limit` again once a denial's wait is over, while that falls within a deadline. */
import type { Rule } from "../config/types";
import { sleep } from "./hold";
import { limitKey, type Held, type LimiterContext } from "./index";

/**
 * Decides `cost` units for `key` as `limitKey` does; a denial whose `retryAfter` ends within
 * `timeoutMs` of the call is waited out (a timer: no CPU spent) and asked again, as often as the
 * deadline allows. Answers with the admission, or at once with a denial that could not pass in
 * time: a wait past the deadline, a cost the rule can never grant. A dry-run rule's would-be
 * denial passes, as from `limit`. If `signal` aborts while waiting, rejects with its reason,
 * holding nothing.
 */
export async function limitWithin(context: LimiterContext, rule: Rule, key: string, cost: number, timeoutMs: number, signal?: AbortSignal): Promise<Held> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const held = await limitKey(context, rule, key, cost, signal);
    const { decision } = held;
    if (decision.allowed || rule.dryRun || decision.reason === "cost-exceeds-capacity") return held;
    const wait = Math.max(1, decision.retryAfter);
    if (Date.now() + wait > deadline) return held;
    if (!(await sleep(wait, signal))) throw signal!.reason;
  }
}
