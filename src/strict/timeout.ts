/** A time budget for a Durable Object call: past it, the rule's onError policy decides instead. */

export class TimeoutError extends Error {
  override readonly name = "TimeoutError";
}

/** How long a request stays busy after its deadline, for an answer already on its way from another request. */
const KEEP_ALIVE_MS = 1_000;

/**
 * Calls `expire` after `ms`, then keeps this request busy until the returned `cancel` is called
 * (at most KEEP_ALIVE_MS more). A promise that another request settles (a strict batch, a shared
 * sync) reaches this one only a moment later, and the runtime cancels a request with nothing of
 * its own pending meanwhile as hung: a 500 (7 of the first 40 requests at a cold key, with a 1 ms
 * timeout, through wrangler dev). Call `cancel` where the outcome is seen, in this request: when
 * `expire` itself settles the wait, that is at once, and the second timer goes with it; it stays
 * only while an outcome settled elsewhere is on its way.
 */
export function deadline(ms: number, expire: () => void): () => void {
  let timer = setTimeout(() => {
    expire();
    timer = setTimeout(() => undefined, KEEP_ALIVE_MS);
  }, ms);
  return () => clearTimeout(timer);
}

/** Settles as `work` does, or rejects with a TimeoutError after `ms`; `timeoutMs`: the budget its message names, when `ms` is what is left of it. */
export function withTimeout<T>(work: Promise<T>, ms: number, timeoutMs = ms): Promise<T> {
  let cancel = () => undefined as void;
  const expired = new Promise<never>((_, reject) => {
    cancel = deadline(ms, () => reject(new TimeoutError(`no answer within ${timeoutMs}ms`)));
  });
  return Promise.race([work, expired]).finally(cancel);
}
