/** Forwards an allowed request to the configured origin, exactly once, body streamed. */
import { metrics } from "../metrics/metrics";
import { badGateway } from "./problem";

/** Connection-level headers (RFC 9110 §7.6.1) that a proxy must not pass on. */
const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
];

/**
 * The origin's URL for a request: the origin's scheme, host and path prefix, then the request's
 * path and query. Only the path and query are taken from the request, so neither a Host header, an
 * absolute-form target nor a crafted path can point floodgate at another host.
 */
export function originUrl(origin: URL, requestUrl: string): URL {
  const incoming = new URL(requestUrl);
  const target = new URL(origin.href);
  target.pathname = origin.pathname.replace(/\/$/, "") + incoming.pathname;
  target.search = incoming.search;
  return target;
}

/** RFC 9110 token, the form of a header name. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The request's headers less hop-by-hop ones and those named in its Connection header. An entry
 * of Connection that is not a header name names nothing: `Headers.delete` would throw on it.
 */
export function forwardedHeaders(headers: Headers): Headers {
  const out = new Headers(headers);
  const named = (headers.get("connection") ?? "").split(",").map((h) => h.trim().toLowerCase());
  for (const name of [...HOP_BY_HOP, ...named, "host"]) if (TOKEN.test(name)) out.delete(name);
  return out;
}

/**
 * Sends the request to the origin and returns its answer, redirects included, untouched. Throws a
 * 502 HttpProblem when the origin cannot be reached (refused, reset, a kept-alive connection it
 * closed): the request is not retried, as it may have arrived.
 */
export async function forward(request: Request, origin: URL): Promise<Response> {
  let upstream: Response;
  try {
    upstream = await fetch(originUrl(origin, request.url), {
      method: request.method,
      headers: forwardedHeaders(request.headers),
      body: request.body,
      redirect: "manual",
    });
  } catch (error) {
    metrics.count("floodgate_errors_total", { kind: "origin" });
    // The runtime's reasons ("Network connection lost.", "internal error; reference = …") name no URL.
    console.error(`floodgate: origin failed: ${error instanceof Error ? error.message : String(error)}`);
    throw badGateway();
  }
  return new Response(upstream.body, upstream);
}
