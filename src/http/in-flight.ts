/** A response whose request holds concurrency slots: the slots come back once its body has been sent, its origin failed, or its client went away. */
import type { Release } from "../limiter/release";

/**
 * Runs `send` (the origin, or the next handler) and returns its response, watching its body on
 * the way out. The slots are given back once, whichever comes first: the body has been handed to
 * the client to its end (or sending it failed), `send` threw (the origin failed), the response has
 * no body, or `signal` aborted (the client went away). `request.signal` fires only under the
 * `enable_request_signal` compatibility flag: without it workerd drops a request whose client left
 * mid-body with no event at all, and its slots wait out `slotTtl`. The release is kept alive by
 * `waitUntil`, registered now, so it runs even after the response is over.
 *
 * @example
 * const response = await sendHolding(checked.release, request.signal, (p) => ctx.waitUntil(p), () => fetch(origin));
 */
export async function sendHolding(
  release: Release | undefined,
  signal: AbortSignal,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
  send: () => Promise<Response>,
): Promise<Response> {
  if (!release) return send();
  let over!: () => void;
  const released = new Promise<void>((resolve) => (over = resolve)).then(release);
  waitUntil?.(released);
  signal.addEventListener("abort", over, { once: true });
  let response: Response;
  try {
    response = await send();
  } catch (error) {
    over();
    throw error;
  }
  if (response.body === null) {
    over();
    return response;
  }
  // The runtime moves bytes through this stream without JavaScript: watching a body costs no CPU per chunk.
  const { readable, writable } = new IdentityTransformStream();
  response.body.pipeTo(writable).then(over, over);
  return new Response(readable, response);
}
