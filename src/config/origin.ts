/** Reads ORIGIN_URL: the one origin floodgate forwards to, or the built-in demo. */
import { ConfigError } from "./errors";

/** Where allowed requests go: a fixed http(s) origin, or the demo echo when none is configured. */
export type Origin = { demo: true } | { demo: false; url: URL };

/**
 * Validates ORIGIN_URL once. It must be an absolute http(s) URL with no query or fragment; a path
 * is kept as a prefix (`https://api.example.com/v1` + `/users` → `/v1/users`).
 */
export function parseOrigin(raw: unknown): Origin {
  if (raw === undefined || raw === "" || raw === "demo") return { demo: true };
  const fail = (why: string) => ConfigError.topLevel(why, "ORIGIN_URL");
  if (typeof raw !== "string") throw fail(`expected a URL like "https://api.example.com", got ${typeof raw}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail(`expected an absolute URL like "https://api.example.com", got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw fail(`expected http or https, got "${url.protocol}"`);
  if (url.search || url.hash || raw.includes("?") || raw.includes("#")) {
    throw fail("must not carry a query or fragment; the request's own are forwarded");
  }
  if (url.username || url.password) throw fail("must not carry credentials; use a header at the origin instead");
  return { demo: false, url };
}
