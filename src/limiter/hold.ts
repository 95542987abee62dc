/** Holding an admitted request until it conforms (gcra's `delay`): a timer raced against the client going away. */
import type { Decision } from "../algorithms";
import type { Rule } from "../config/types";
import { metrics } from "../metrics/metrics";

/**
 * Waits out the longest hold among the enforced rules' decisions, with a timer (no CPU spent
 * waiting), unless `signal` aborts first: true when the request may go on (at once when nothing
 * holds it), false when its client went away while held. A dry-run rule never holds, as it never
 * denies. The caller gives the units back on false; they were counted when the request was admitted.
 */
export async function waitHold(entries: readonly { rule: Rule; decision: Decision }[], signal: AbortSignal | undefined): Promise<boolean> {
  let longest: { rule: Rule; ms: number } | undefined;
  for (const { rule, decision } of entries) {
    const ms = decision.allowed && !rule.dryRun ? (decision.holdMs ?? 0) : 0;
    if (ms > (longest?.ms ?? 0)) longest = { rule, ms };
  }
  if (!longest) return true;
  const waited = await sleep(longest.ms, signal);
  metrics.count("floodgate_holds_total", { rule: longest.rule.name, outcome: waited ? "released" : "abandoned" });
  return waited;
}

/** Resolves true after `ms`, or false as soon as `signal` aborts; nothing is left behind either way. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const gone = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", gone);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", gone, { once: true });
  });
}
