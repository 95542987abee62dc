/** Request paths in the one form rules match and key them by, and path globs written in it. */

/**
 * The characters of a path the URL standard percent-encodes (its path percent-encode set, less the
 * controls, spaces, "?" and "#" a glob may not hold), and every non-ASCII one. Written out rather
 * than left to the host's URL parser: Node 20's leaves "^" as it is, where workerd's encodes it, and
 * `npm run deploy` (Node) must judge a glob exactly as the Worker does.
 */
const ENCODED = /["<>^`{}]|[^\x00-\x7f]+/gu;

/**
 * A character whose escape means the character itself, to any origin: one RFC 3986 calls
 * unreserved, or one it does not allow in a path at all ("[", "]", "^", "|") that the URL standard
 * leaves as it is (workerd's parser escapes "^", Node's does not): an origin that takes it raw
 * takes it as data, as it takes its escape once decoded.
 */
const PLAIN = /^[A-Za-z0-9\-._~[\]^|]$/;

/**
 * A request path as rules match it and key it: its escapes of plain characters decoded (`%61` is
 * `a`, `%7C` is `|`), the rest upper-cased (`%c3%a9` is `%C3%A9`), as RFC 3986 normalizes a URI,
 * and a "%" that starts no escape escaped (`%zz` is `%25zz`), as origins that take it at all take
 * it as the "%" its escape decodes to. The runtime hands a path over as the client wrote it, and
 * origins decode both forms alike, so without this `/%61pi/x` would pass a rule on `/api/*`, and a
 * path key would mint a quota per spelling. Reserved escapes (`%2F`) stay escaped: an origin may
 * tell them apart.
 */
export function normalizePath(path: string): string {
  return normalized(path, false);
}

/**
 * {@link normalizePath}, and for a glob (`glob`) a "%" that a "*" follows, at once or after one hex
 * digit, left as it is: `/files/%2*` means every escape starting `%2`, as it did before a stray "%"
 * was escaped.
 */
function normalized(path: string, glob: boolean): string {
  if (!path.includes("%")) return path;
  return path.replace(/%(?:[0-9A-Fa-f]{2})?/g, (escape, at: number) => {
    if (escape.length === 1) return glob && /^[0-9A-Fa-f]?\*/.test(path.slice(at + 1)) ? "%" : "%25";
    const char = String.fromCharCode(parseInt(escape.slice(1), 16));
    return PLAIN.test(char) ? char : escape.toUpperCase();
  });
}

/**
 * A path as written (a rule's glob, with `glob`, or an operator's key) in the form a request path
 * that fits it is matched in: percent-encoded, "\" as "/", "." and ".." segments (also written %2e)
 * resolved as the URL standard parses an http URL's path, and then normalized ({@link normalizePath}).
 */
export function pathAsMatched(path: string, { glob = false } = {}): string {
  const encoded = path.replaceAll("\\", "/").replace(ENCODED, (run) => encodeURIComponent(run));
  const segments: string[] = [];
  const parts = encoded.slice(1).split("/");
  parts.forEach((segment, i) => {
    const dots = segment.replace(/%2e/gi, ".");
    const last = i === parts.length - 1;
    if (dots === "..") {
      segments.pop();
      if (last) segments.push("");
    } else if (dots === ".") {
      if (last) segments.push("");
    } else {
      segments.push(segment);
    }
  });
  return normalized(`/${segments.join("/")}`, glob);
}

/** Whether {@link routedPath} could read `path` otherwise: an upper-case letter, a ";", an escaped slash or backslash, or an empty, dot or trailing segment. */
const LENIENT = /[A-Z;]|%2[Ff]|%5[Cc]|\/\/|\/\.|.\/$/;

/**
 * A normalized path (or a glob) as the most lenient origins route it: in lower case (Express,
 * ASP.NET), each segment's `;` parameters dropped (Tomcat, Spring), `%2F` read as "/" (Go's older
 * muxes, WSGI's PATH_INFO, nginx) and so is `%5C` (IIS takes a backslash for a slash), empty segments dropped (nginx merges slashes; Express takes a
 * trailing one), and dot segments resolved. `/API//v1;x/Users/` is `/api/v1/users`. The path
 * itself when there is nothing to read otherwise.
 */
export function routedPath(path: string): string {
  return LENIENT.test(path) ? `/${routedSegments(path).join("/")}` : path;
}

/**
 * Whether a lenient origin routes the path as a directory, one ending in "/" (`/ADMIN/`,
 * `/admin%2F`, `/admin;x/`, `/admin/x%2F..` are `/admin/`), which {@link routedPath} writes
 * without it: a glob such as `/admin/*` fits that directory as written, so it fits these too.
 */
export function routesAsDirectory(path: string): boolean {
  if (!LENIENT.test(path)) return path.endsWith("/");
  const last = readSegments(path).at(-1)!;
  return last === "" || last === "." || last === "..";
}

/** The path's segments as {@link routedPath} reads them, empty and dot segments resolved. */
function routedSegments(path: string): string[] {
  const segments: string[] = [];
  for (const bare of readSegments(path)) {
    if (bare === "..") segments.pop();
    else if (bare !== "" && bare !== ".") segments.push(bare);
  }
  return segments;
}

/** The path's segments in lower case, split at slashes and escaped slashes and backslashes, each without its `;` parameters. */
function readSegments(path: string): string[] {
  return path.toLowerCase().replaceAll("%2f", "/").replaceAll("%5c", "/").split("/").map((segment) => segment.replace(/;.*$/, ""));
}
