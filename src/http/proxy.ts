/** Forwards an allowed request to the configured origin, exactly once, body streamed. */
import { countError } from "../metrics/log";
import { AnswerLost, badGateway } from "./problem";

/**
 * Connection-level headers (RFC 9110 §7.6.1) that a proxy must not pass on, and `Expect`: the
 * runtime's fetch streams the body without waiting, and would hand back the origin's interim
 * `100 Continue` as the response (a RangeError, then the body never sent). Host needs no entry:
 * the runtime sets it from the URL fetched, whatever the headers say.
 */
const HOP_BY_HOP = [
  "connection",
  "expect",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
];

/** A header name (RFC 9110 token), lower-cased: what an entry of Connection must be to name a header. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/**
 * The origin's URL for a request: the origin's scheme, host and path prefix, then the request's
 * path and query. Only the path and query are taken from the request, so neither a Host header, an
 * absolute-form target nor a crafted path can point floodgate at another host: a parsed path always
 * starts with "/", after the origin's authority.
 */
export function originUrl(origin: URL, url: URL): string {
  const prefix = origin.pathname.endsWith("/") ? origin.pathname.slice(0, -1) : origin.pathname;
  return `${origin.origin}${prefix}${url.pathname}${url.search}`;
}

/**
 * The request's headers less hop-by-hop ones and those named in its Connection header, each header
 * a key is read from (`keyed`) sent as one line: the request's own when nothing changes (the usual
 * case), a copy otherwise. Each name is looked up rather than every header walked: a walk copies
 * and sorts them all, for a browser's dozen or more. An entry of Connection that is not a header
 * name (on which `Headers.has` would throw) names none.
 */
export function forwardedHeaders(headers: Headers, keyed: readonly string[] = []): Headers {
  const named = connectionOptions(headers);
  // `Upgrade: websocket` is how the runtime's fetch is asked to open a WebSocket to the origin: kept, it is proxied.
  const webSocket = isWebSocketUpgrade(headers);
  let out: Headers | undefined;
  // A key is counted under a header's lines joined by ", ", as the Fetch API reads them; passed on line by line, an
  // origin reading the first (Go's Header.Get, nginx's $http_) would take "k-victim" from "k-victim" and "junk-1",
  // each of which was counted as a fresh key. One line, as RFC 9110 §5.3 lets a proxy combine them, is what was counted.
  for (const name of keyed) {
    const value = headers.get(name);
    if (value?.includes(",")) (out ??= new Headers(headers)).set(name, value);
  }
  for (const name of HOP_BY_HOP) if (headers.has(name) && !(webSocket && name === "upgrade")) (out ??= new Headers(headers)).delete(name);
  for (const name of named) if (headers.has(name) && !(webSocket && name === "upgrade")) (out ??= new Headers(headers)).delete(name);
  return out ?? headers;
}

/** The header names a message's Connection header lists (RFC 9110 §7.6.1): fields meant for one hop, which a proxy removes. */
function connectionOptions(headers: Headers): string[] {
  const connection = headers.get("connection");
  return connection === null ? [] : connection.split(",").map((h) => h.trim().toLowerCase()).filter((h) => HEADER_NAME.test(h));
}

/** Whether the request asks to open a WebSocket (RFC 6455): `Upgrade: websocket`, any case. */
function isWebSocketUpgrade(headers: Headers): boolean {
  return headers.get("upgrade")?.trim().toLowerCase() === "websocket";
}

/**
 * Sends the request to the origin and returns its answer, redirects included, untouched (the
 * caller drops what its Connection header names: {@link withoutConnectionOptions}); an opened
 * WebSocket is handed through as the 101 it is. `keyed`: the headers the rules read keys from
 * (see {@link forwardedHeaders}). Throws a
 * 502 HttpProblem when the origin cannot be reached (refused, reset, a kept-alive connection it
 * closed): the request is not retried, as it may have arrived. Throws {@link AnswerLost}, a 502
 * too, when the origin answered with an interim response first, which the runtime hands back in
 * place of the final one.
 */
export async function forward(request: Request, url: URL, origin: URL, keyed: readonly string[]): Promise<Response> {
  const headers = forwardedHeaders(request.headers, keyed);
  // An incoming request is in "manual" redirect mode already. Handed over whole when nothing is
  // removed, it spares the runtime a copy: a few percent of throughput. The copy is made from the
  // request, not from an init dictionary: fetch refuses a dictionary giving a GET or HEAD a body,
  // and such requests do arrive with one (Elasticsearch's search).
  const init: Request = headers === request.headers && request.redirect === "manual"
    ? request
    : new Request(request, { headers, redirect: "manual" });
  let upstream: Response;
  try {
    upstream = await fetch(originUrl(origin, url), init);
  } catch (error) {
    // The runtime's reasons ("Network connection lost.", "internal error; reference = …") name no URL.
    countError("origin")(error);
    throw badGateway();
  }
  // An opened WebSocket is handed to the client whole; a new Response makes its headers ours to add to.
  if (upstream.webSocket) return new Response(null, { status: 101, webSocket: upstream.webSocket, headers: upstream.headers });
  if (upstream.status < 200) {
    // The runtime's fetch hands back an interim answer (103 Early Hints) as if it were the final one, which is then lost.
    const message = `The origin sent an interim ${upstream.status} response, which cannot be passed on.`;
    countError("origin")(new Error(message));
    throw new AnswerLost(message);
  }
  return new Response(upstream.body, upstream);
}

/**
 * Hop-by-hop headers of a response that the runtime's fetch passes on (it drops the others
 * itself): `Proxy-Authenticate` asks the next client on the chain, floodgate, for credentials it
 * never sends, and `Proxy-Connection` is the old spelling of `Connection`.
 */
const RESPONSE_HOP_BY_HOP = ["proxy-authenticate", "proxy-connection"];

/**
 * The response less its hop-by-hop headers and those its Connection header names (RFC 9110
 * §7.6.1), which were meant for floodgate's hop alone, as a client's are on the way in. Called once
 * a `responseCost` rule has read them: an origin may name its cost header there to keep it from clients.
 */
export function withoutConnectionOptions(response: Response): Response {
  for (const name of [...RESPONSE_HOP_BY_HOP, ...connectionOptions(response.headers)]) response.headers.delete(name);
  return response;
}
