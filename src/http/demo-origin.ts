/** The built-in origin for local runs: it echoes what it received as JSON. */
import { forwardedHeaders } from "./proxy";

/** Answers with the request's method, path, query, headers and body size. */
export async function demoOrigin(request: Request): Promise<Response> {
  const url = new URL(request.url);
  const body = request.body ? (await request.arrayBuffer()).byteLength : 0;
  return Response.json({
    origin: "floodgate demo",
    method: request.method,
    path: url.pathname,
    query: url.search,
    headers: Object.fromEntries(forwardedHeaders(request.headers)),
    bodyBytes: body,
  });
}
