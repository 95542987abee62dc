/** Reads ORIGIN_URL: the one origin floodgate forwards to, the built-in demo when it says "demo", or none for a binding-only deployment. */
import { ConfigError } from "./errors";

/**
 * Where allowed requests go: a fixed http(s) origin, the demo echo when ORIGIN_URL is "demo", or
 * nowhere when it is "none" (a deployment that serves its service binding and admin API only).
 */
export type Origin = { kind: "url"; url: URL } | { kind: "demo" } | { kind: "none" };

/**
 * Validates ORIGIN_URL once. It must be an absolute http(s) URL with no query or fragment; a path
 * is kept as a prefix (`https://api.example.com/v1` + `/users` → `/v1/users`). `"demo"` selects the
 * built-in echo origin and `"none"` no proxy at all, each on purpose only: absent or empty is an
 * error, so a deployment that lost its [vars] answers 500 instead of serving the echo.
 *
 * @example
 * parseOrigin("https://api.example.com"); // { kind: "url", url: URL }
 * parseOrigin("demo"); // { kind: "demo" }
 * parseOrigin("none"); // { kind: "none" }
 * parseOrigin(undefined); // throws: ORIGIN_URL: not set; write ORIGIN_URL = "https://api.example.com" …
 */
export function parseOrigin(raw: unknown): Origin {
  if (raw === "demo") return { kind: "demo" };
  if (raw === "none") return { kind: "none" };
  const fail = (why: string) => ConfigError.topLevel(why, "ORIGIN_URL");
  if (raw === undefined || raw === "") {
    throw fail(`not set; write ORIGIN_URL = "https://api.example.com" (your API) in [vars], "none" when floodgate serves only its service binding, or "demo" for the built-in echo origin in local runs`);
  }
  if (typeof raw !== "string") throw fail(`expected a URL like "https://api.example.com", got ${typeof raw}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail(`expected an absolute URL like "https://api.example.com", got ${JSON.stringify(withoutCredentials(raw))}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw fail(`expected http or https, got "${url.protocol}"`);
  if (url.search || url.hash || raw.includes("?") || raw.includes("#")) {
    throw fail("must not carry a query or fragment; the request's own are forwarded");
  }
  if (url.username || url.password) throw fail("must not carry credentials; use a header at the origin instead");
  return { kind: "url", url };
}

/**
 * `raw` with whatever lies between its scheme and its last `@` written `…`: this error is the 500
 * every client is sent, and a URL that fails to parse may still carry a user and password, whose
 * "/", "?" or "#" (unescaped, as a URL that fails to parse may well have them) ended the authority early.
 */
function withoutCredentials(raw: string): string {
  return raw.replace(/^([^:/?#]*:[/\\]*).*@/, "$1…@");
}
