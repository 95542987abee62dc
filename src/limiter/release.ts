/** A request's concurrency slots: renewed while it is in flight, given back exactly once however many ways its end is seen (response sent, origin failed, client gone). */
import { renewStrict } from "../strict";
import { countError, giveBack, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Gives the request's concurrency slots back; resolves once they are. Only the first call gives
 * anything back (a second would free another request's slot), later ones get the same promise.
 */
export type Release = () => Promise<void>;

/**
 * `{ release }` when a concurrency rule admitted the request (a dry-run one too: it holds slots as
 * if enforced), otherwise `{}`. Other algorithms' units are spent by being admitted; only a slot
 * comes back when the request is over. Until then each slot the object holds is renewed (see
 * {@link renewing}), so a request in flight longer than `slotTtl` keeps it.
 */
export function releaseOf(taken: readonly { ask: Ask; taken: Taken }[], context: LimiterContext): { release?: Release } {
  const slots = taken.filter((t) => t.ask.rule.algorithm === "concurrency" && t.taken.decision.allowed).map((t) => ({ ask: t.ask, held: renewing(t.ask, t.taken, context) }));
  if (slots.length === 0) return {};
  let released: Promise<void> | undefined;
  const release = () => (released ??= Promise.all(slots.map(async (s) => giveBack(s.ask, await s.held(), context))).then(() => undefined));
  return { release };
}

/**
 * Renews slots the object took at `countedAt` every third of `slotTtl` while the request holds
 * them, each renewal moving them to the object's now: a slot then runs out `slotTtl` after its
 * last renewal, which only a request whose isolate vanished misses. A renewal that fails is
 * counted and tried again at the next turn (one failure leaves a third of the TTL to spare); one
 * that finds the slots gone (expired, or reset) ends them. Returns the way to stop, which resolves
 * with the slots as last renewed, for their release to find them. The local fallback's slots are
 * not renewed: they last `slotTtl`, as everything during an outage is approximate.
 */
function renewing(ask: Ask, taken: Taken, context: LimiterContext): () => Promise<Taken> {
  if (taken.countedAt === undefined || taken.decision.reason === "error") return () => Promise.resolve(taken);
  let held = taken;
  let stopped = false;
  let turn: Promise<void> = Promise.resolve();
  let timer: ReturnType<typeof setTimeout>;
  const next = () => {
    timer = setTimeout(() => {
      turn = renewStrict(context.namespace, ask.objectName, ask.rule, ask.cost, held.countedAt!).then(
        (at) => {
          if (at > 0) held = { ...held, countedAt: at };
          if (at > 0 && !stopped) next();
        },
        (error) => {
          countError("renew")(error);
          if (!stopped) next();
        },
      );
    }, ask.rule.periodMs / 3);
  };
  next();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await turn;
    return held;
  };
}
