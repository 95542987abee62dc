/** A response whose request holds concurrency slots: the slots come back once its body has been sent, its origin failed, or its client went away. */
import type { Release } from "../limiter/release";

/**
 * Runs `send` (the origin, or the next handler) and returns its response, watching its body on
 * the way out. The slots are given back once, whichever comes first: the body has been handed to
 * the client to its end (or sending it failed), `send` threw (the origin failed), the response has
 * no body, a WebSocket it opened has closed, or `signal` aborted (the client went away).
 * `request.signal` fires only under the `enable_request_signal` compatibility flag: without it
 * workerd drops a request whose client left mid-body with no event at all, and its slots wait out
 * `slotTtl`. The release is kept alive by `waitUntil`, registered now, so it runs even after the
 * response is over. `bodiless`: the client is sent no body whatever the response holds (a HEAD,
 * which Hono answers by dropping the GET handler's body unread): the slots come back with the
 * response.
 *
 * @example
 * const response = await sendHolding(checked.release, request.signal, (p) => ctx.waitUntil(p), () => fetch(origin));
 */
export async function sendHolding(
  release: Release | undefined,
  signal: AbortSignal,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
  send: () => Promise<Response>,
  bodiless = false,
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
  // An opened WebSocket is in flight while it is open: its messages go through a pair watched for its close.
  if (response.webSocket) return new Response(null, { status: 101, headers: response.headers, webSocket: watched(response.webSocket, over) });
  if (response.body === null || bodiless) {
    over();
    return response;
  }
  // The runtime moves bytes through this stream without JavaScript: watching a body costs no CPU per chunk.
  const { readable, writable } = watcher(response.headers);
  response.body.pipeTo(writable).then(over, over);
  return new Response(readable, response);
}

/**
 * The stream a body is watched through: one of the length the origin gave, when it gave one for
 * the bytes this stream carries (no Content-Encoding, which the runtime decodes on the way in and
 * encodes again on the way out), so the client still gets its Content-Length rather than a chunked
 * body of unknown size.
 */
function watcher(headers: Headers): TransformStream<Uint8Array, Uint8Array> {
  const encoding = headers.get("content-encoding");
  const length = Number(headers.get("content-length") ?? Number.NaN);
  const plain = encoding === null || encoding.trim().toLowerCase() === "identity";
  return plain && Number.isSafeInteger(length) && length >= 0 ? new FixedLengthStream(length) : new IdentityTransformStream();
}

/** Close codes a close frame may not carry (RFC 6455 §7.4.1, and 1004, reserved): the other side is closed normally instead. */
const UNSENDABLE = new Set([1004, 1005, 1006, 1015]);

/**
 * The client's end of a WebSocket that relays `origin` message for message, and calls `closed`
 * once either side closes or fails (closing the other). Only sockets holding slots pay for it.
 */
function watched(origin: WebSocket, closed: () => void): WebSocket {
  const [client, server] = Object.values(new WebSocketPair()) as [WebSocket, WebSocket];
  // Binary messages arrive as ArrayBuffers, sent on as binary: as Blobs (the default under recent
  // compatibility dates) send() would turn them into the text "[object Blob]".
  server.binaryType = "arraybuffer";
  origin.binaryType = "arraybuffer";
  server.accept();
  origin.accept();
  const relay = (to: WebSocket) => (event: MessageEvent) => {
    try {
      to.send(event.data);
    } catch {
      // That side is closing: its close event ends the pair.
    }
  };
  server.addEventListener("message", relay(origin));
  origin.addEventListener("message", relay(server));
  const ends = (other: WebSocket) => (event: Event) => {
    const { code, reason } = event as CloseEvent;
    try {
      other.close(code === undefined || UNSENDABLE.has(code) ? 1000 : code, reason);
    } catch {
      // Already closed, or closing: nothing more to tell it.
    }
    closed();
  };
  server.addEventListener("close", ends(origin));
  origin.addEventListener("close", ends(server));
  server.addEventListener("error", ends(origin));
  origin.addEventListener("error", ends(server));
  return client;
}
