/** A request's concurrency slots: renewed while it is in flight, given back exactly once however many ways its end is seen (response sent, origin failed, client gone). */
import { renewStrict } from "../strict";
import { countError } from "../metrics/log";
import { giveBack, type Ask, type LimiterContext, type Taken } from "./index";

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
  // Arguments are ignored, not refused: `done.then(result.release)` hands it the promise's value.
  const release: Release = () =>
    (released ??= Promise.all(
      slots.map(async ({ ask, held }) => {
        const where = await held();
        if (where) await giveBack(ask, where, context);
      }),
    ).then(() => undefined));
  return { release };
}

/**
 * Renews slots the object took every third of `slotTtl` while the request holds them, each
 * renewal moving them to a time this isolate picks (see renewConcurrency): a slot then runs out
 * `slotTtl` after its last renewal, which only a request whose isolate vanished misses. Each is due
 * a third after the last was sent (the first, after the object took the slots), however slow its
 * answer. A renewal that fails is counted and tried again at the next turn (one failure leaves a
 * third of the TTL to spare), asking the object to look for the slots where it may have moved them
 * too, since its answer may be what was lost; one that finds them gone (expired, or reset) ends
 * the renewals.
 * Returns the way to stop, which resolves with the slots where they now are, for their release to
 * find them; undefined when they are gone, or where they are cannot be known (a renewal's answer
 * lost, and no answer since): they are then left to run out, rather than given back at a time that
 * may be another request's.
 * The local fallback's slots are not renewed: they last `slotTtl`, as everything during an outage
 * is approximate.
 */
function renewing(ask: Ask, taken: Taken, context: LimiterContext): () => Promise<Taken | undefined> {
  if (taken.countedAt === undefined || taken.decision.reason === "error") return () => Promise.resolve(taken);
  let at = taken.countedAt;
  /** times renewals asked to move the slots to, whose answers never came: newest first */
  let unsure: number[] = [];
  let gone = false;
  let stopped = false;
  let wake = () => undefined as void;
  const renew = async (): Promise<boolean> => {
    const to = Math.max(Date.now(), at + 1, (unsure[0] ?? 0) + 1);
    try {
      const renewedAt = await renewStrict(context.namespace, ask.objectName, ask.rule, ask.cost, [...unsure, at], to);
      if (renewedAt > 0) [at, unsure] = [renewedAt, []];
      gone = renewedAt === 0;
      return !gone;
    } catch (error) {
      countError("renew", ask.rule)(error);
      unsure = [to, ...unsure];
      return true;
    }
  };
  const renewals = (async () => {
    // The object holds the slots from each renewal's time, so a slow answer must not eat the next one's margin. Never
    // later than now: the object's clock may run ahead of this isolate's.
    let started = Math.min(Date.now(), at);
    while (!stopped) {
      const due = started + ask.rule.periodMs / 3 - Date.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, due));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (stopped) return;
      started = Date.now();
      if (!(await renew())) return;
    }
  })();
  return async () => {
    stopped = true;
    wake();
    await renewals;
    if (unsure.length > 0 && !gone) await renew();
    return unsure.length > 0 || gone ? undefined : { ...taken, countedAt: at };
  };
}
