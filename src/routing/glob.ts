/** Path globs for `match.path`: `*` matches any run of characters (including "/"), all else is literal. */

/** A compiled glob: true when the whole path matches. */
export type PathMatcher = (path: string) => boolean;

/**
 * Compiles a glob into a matcher anchored at both ends.
 *
 * No regular expression is built: the glob is split at `*` into literal pieces, the first must
 * start the path, the last must end it, and the others are found left to right with `indexOf`.
 * Taking the earliest occurrence of each middle piece is always safe (it leaves the most room for
 * the rest), so there is no backtracking and the cost is at most path length × glob length, even
 * for a hostile path against a glob such as `/*a*a*a*b`. Paths come from clients; globs from config.
 *
 * @example
 * const api = compileGlob("/api/*");
 * api("/api/v1/users"); // true
 * api("/apix");         // false
 * compileGlob("/v?/a.b")("/v?/a.b"); // true: `?` and `.` are literal
 */
export function compileGlob(glob: string): PathMatcher {
  const pieces = glob.split("*");
  const first = pieces[0] ?? "";
  if (pieces.length === 1) return (path) => path === first;

  const last = pieces[pieces.length - 1] ?? "";
  // Empty pieces come from runs of `*`, which mean the same as one `*`.
  const middle = pieces.slice(1, -1).filter((piece) => piece !== "");
  const fixedLength = first.length + last.length;

  return function matchGlob(path) {
    if (path.length < fixedLength || !path.startsWith(first) || !path.endsWith(last)) return false;
    const end = path.length - last.length;
    let from = first.length;
    for (const piece of middle) {
      const at = path.indexOf(piece, from);
      if (at === -1 || at + piece.length > end) return false;
      from = at + piece.length;
    }
    return true;
  };
}
