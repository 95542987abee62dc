/** A time budget for a Durable Object call: past it, the rule's onError policy decides instead. */

export class TimeoutError extends Error {
  override readonly name = "TimeoutError";

  /** `unsent`: the request ran out of time before any call carried it, so its object never decides it. */
  constructor(
    message: string,
    readonly unsent = false,
  ) {
    super(message);
  }
}

/** How long a request stays busy after its deadline, for a hand-off already on its way from another request. */
const KEEP_ALIVE_MS = 1_000;

/**
 * Calls `expire` after `ms`, then keeps this request busy until the returned `cancel` is called
 * (at most KEEP_ALIVE_MS more). A promise that another request settles (a strict batch to send, a
 * shared sync) reaches this one only a moment later, and the runtime cancels a request with
 * nothing of its own pending meanwhile as hung: a 500 (7 of the first 40 requests at a cold key,
 * with a 1 ms timeout, through wrangler dev). Call `cancel` where the outcome is seen, in this
 * request: when `expire` itself settles the wait, that is at once, and the second timer goes with
 * it; it stays only while an outcome settled elsewhere is on its way. On a saturated core that
 * may take longer than KEEP_ALIVE_MS: what a request answers with must never wait for it (see
 * {@link handedBy}).
 */
export function deadline(ms: number, expire: () => void): () => void {
  let timer = setTimeout(() => {
    expire();
    timer = setTimeout(() => undefined, KEEP_ALIVE_MS);
  }, ms);
  return () => clearTimeout(timer);
}

/** What another request hands this one: its answer, or the error its call failed with. */
export type Handed<T> = { value: T } | { error: unknown };

/**
 * The answer to a wait that another request's code ends (a strict batch another request sends),
 * settled only by this request's own code: once `woken` reaches it, or at the latest after `ms`,
 * from what `handed()` holds then, else with the error `expire()` returns. Settled by the other
 * request, it reached this one when the runtime got round to it: on a saturated core (900 clients
 * through wrangler dev) after this request's keep-alive had run out, and the runtime cancelled it
 * as hung, a 500 after a wait, where its rule's onError was due (12 of 8,000 requests).
 * `cancel` is {@link deadline}'s.
 */
export function handedBy<T>(ms: number, woken: Promise<unknown>, handed: () => Handed<T> | undefined, expire: () => unknown): { answer: Promise<T>; cancel: () => void } {
  let cancel!: () => void;
  const answer = new Promise<T>((resolve, reject) => {
    const settle = (outcome: Handed<T>) => ("value" in outcome ? resolve(outcome.value) : reject(outcome.error));
    void woken.then(() => {
      const outcome = handed();
      if (outcome) settle(outcome);
    });
    cancel = deadline(ms, () => settle(handed() ?? { error: expire() }));
  });
  return { answer, cancel };
}

/** Settles as `work` does, or rejects with a TimeoutError after `ms`; `timeoutMs`: the budget its message names, when `ms` is what is left of it. */
export function withTimeout<T>(work: Promise<T>, ms: number, timeoutMs = ms): Promise<T> {
  let cancel = () => undefined as void;
  const expired = new Promise<never>((_, reject) => {
    cancel = deadline(ms, () => reject(new TimeoutError(`no answer within ${timeoutMs}ms`)));
  });
  return Promise.race([work, expired]).finally(cancel);
}
