/** A request's concurrency slots, given back exactly once however many ways its end is seen (response sent, origin failed, client gone). */
import { giveBack, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Gives the request's concurrency slots back; resolves once they are. Only the first call gives
 * anything back (a second would free another request's slot), later ones get the same promise.
 */
export type Release = () => Promise<void>;

/**
 * `{ release }` when a concurrency rule admitted the request (a dry-run one too: it holds slots as
 * if enforced), otherwise `{}`. Other algorithms' units are spent by being admitted; only a slot
 * comes back when the request is over.
 */
export function releaseOf(taken: readonly { ask: Ask; taken: Taken }[], context: LimiterContext): { release?: Release } {
  const slots = taken.filter((t) => t.ask.rule.algorithm === "concurrency" && t.taken.decision.allowed);
  if (slots.length === 0) return {};
  let released: Promise<void> | undefined;
  const release = () => (released ??= Promise.all(slots.map((s) => giveBack(s.ask, s.taken, context))).then(() => undefined));
  return { release };
}
