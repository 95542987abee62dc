/** What kind of failure a Durable Object call's error is, by the marks Cloudflare sets on it. */

/**
 * `overloaded`: the object cannot keep up; never retry, back off (a retry adds to the overload).
 * `retryable`: a transient fault; a call that is safe to repeat may be retried once.
 * `other`: anything else, including errors the object's own code threw.
 */
export type ObjectErrorKind = "overloaded" | "retryable" | "other";

/**
 * Reads `.overloaded` and `.retryable`, which Cloudflare sets to true on the Error a stub call
 * rejects with (they survive RPC, with `.remote` added when the object's code threw). An error
 * marked both is overloaded: not retrying is the safe reading.
 *
 * @example
 * if (objectErrorKind(error) === "overloaded") breakers.overloaded(name, rule.timeoutMs, now);
 */
export function objectErrorKind(error: unknown): ObjectErrorKind {
  if (typeof error !== "object" || error === null) return "other";
  const marks = error as { overloaded?: unknown; retryable?: unknown };
  if (marks.overloaded === true) return "overloaded";
  if (marks.retryable === true) return "retryable";
  return "other";
}

/**
 * Makes an idempotent call, and once more when it fails with an error Cloudflare marks retryable;
 * never after an overloaded one (a retry adds to the overload) nor any other.
 */
export function retriedOnce<T>(call: () => Promise<T>): Promise<T> {
  return call().catch((error: unknown) => {
    if (objectErrorKind(error) !== "retryable") throw error;
    return call();
  });
}
