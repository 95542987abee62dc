/** A time budget for a Durable Object call: past it, the rule's onError policy decides instead. */

export class TimeoutError extends Error {
  override readonly name = "TimeoutError";
}

/** Settles as `work` does, or rejects with a TimeoutError after `ms`. */
export function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`no answer within ${ms}ms`)), ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}
