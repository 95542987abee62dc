/** The built-in origin for local runs: it echoes what it received as JSON, credentials redacted. */
import { forwardedHeaders } from "./proxy";

/** Headers whose values the echo never shows: it answers anyone, so it must not hand credentials back. */
const REDACTED = new Set(["cookie", "authorization", "proxy-authorization"]);

/**
 * Answers with the request's method, path, query, headers and body size. The values of Cookie and
 * Authorization show as "[redacted]"; their names still appear. Proxy-Authorization, hop-by-hop,
 * is dropped before it as before any origin, and would be redacted too.
 */
export async function demoOrigin(request: Request): Promise<Response> {
  const url = new URL(request.url);
  const body = request.body ? (await request.arrayBuffer()).byteLength : 0;
  const headers: Record<string, string> = {};
  for (const [name, value] of forwardedHeaders(request.headers)) headers[name] = REDACTED.has(name) ? "[redacted]" : value;
  return Response.json({
    origin: "floodgate demo",
    method: request.method,
    path: url.pathname,
    query: url.search,
    headers,
    bodyBytes: body,
  });
}
