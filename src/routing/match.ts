/** Which rules apply to a request: path glob, method, host and client address, as the Rules table defines them. */
import type { Rule } from "../config/types";
import { compileGlob, type PathMatcher } from "./glob";
import { normalizePath, routedPath, routesAsDirectory } from "./path";

/** The parts of a request that `match` looks at. */
export interface MatchTarget {
  /** the request method, any case */
  method: string;
  /** the URL pathname as received (`new URL(request.url).pathname`), not percent-decoded */
  path: string;
  /** the URL host, any case, with its port ({@link hostOf}: the scheme's default written out) */
  host: string;
  /** the client address, `CF-Connecting-IP` and nothing else; absent, it is in no rule's `match.ips` */
  ip?: string | null;
}

interface CompiledMatch {
  path: PathMatcher;
  /** the glob as lenient origins route it, for a path read so ({@link routedPath}): `path` itself when it reads as itself, null for a glob read only as written ({@link WRITTEN}) */
  routed: PathMatcher | null;
  methods: ReadonlySet<string> | null;
  host: string | null;
  hostHasPort: boolean;
}

// Rules are immutable once parsed, so each one is compiled the first time it is matched; the
// WeakMap lets a reloaded config's rules be collected with their compiled forms.
const compiled = new WeakMap<Rule, CompiledMatch>();

/**
 * A ";" or an escaped slash or backslash in a glob: written there, it says which requests the rule
 * is for (`*;jsessionid=*`, GitLab's `/projects/*%2F*`), which reading it as lenient origins route
 * would erase, making the rule apply to `/Products` or `/projects/42/Issues`.
 */
const WRITTEN = /;|%2F|%5C/i;

/**
 * Every rule whose `match` fits the request, in the rules' order.
 *
 * Paths compare as {@link normalizePath} makes them: `/%61pi/x` is `/api/x`. A rule also applies
 * when the path as lenient origins route it ({@link routedPath}: any case, no `;` parameters,
 * `%2F` as "/", no empty segments) fits the glob read the same way: an origin that serves
 * `/LOGIN`, `/login;x`, `//login` or `/login/` as `/login` must not have them let by a rule on
 * `/login`. A glob holding a ";" or an escaped slash is read only as written: those are what it
 * is for.
 *
 * Methods compare upper-case. Hosts compare lower-case and without the port, unless the rule's
 * host names a port, in which case the request's port must be the same. A trailing dot (the
 * fully-qualified form) is ignored on both sides, so `api.example.com.` cannot dodge a rule. A
 * rule with `match.ips` applies only to a client address in the list (a request with no address
 * is in no list).
 *
 * @example
 * const url = new URL(request.url);
 * matchingRules(config.rules, { method: request.method, path: url.pathname, host: hostOf(url) });
 */
export function matchingRules(rules: readonly Rule[], request: MatchTarget): Rule[] {
  const method = request.method.toUpperCase();
  // Most rules name no host: the request's is normalized only for one that does.
  let host: string | undefined;
  let hostWithoutPort: string | undefined;
  const path = normalizePath(request.path);
  const routed = routedPath(path);
  return rules.filter((rule) => {
    const match = compiledMatch(rule);
    if (match.methods !== null && !match.methods.has(method)) return false;
    if (match.host !== null) {
      host ??= normalizeHost(request.host);
      hostWithoutPort ??= stripPort(host);
      if (match.host !== (match.hostHasPort ? host : hostWithoutPort)) return false;
    }
    if (rule.match.ips && !rule.match.ips.has(request.ip)) return false;
    return pathFits(match, path, routed);
  });
}

/** Whether a normalized path (`routed`: as {@link routedPath} reads it) meets the rule's glob, as written or as lenient origins route both. */
function pathFits(match: CompiledMatch, path: string, routed: string): boolean {
  if (match.path(path)) return true;
  // Read otherwise when either side does: /account/login reads as itself, and is how a glob /Account/Login reads.
  if (match.routed === null || (routed === path && match.routed === match.path)) return false;
  // A directory (/ADMIN/ is /admin/) is read without its trailing slash, which a glob such as /admin/* needs to fit it.
  return match.routed(routed) || (routed !== "/" && routesAsDirectory(path) && match.routed(`${routed}/`));
}

/**
 * Whether `rule.match` lets through some request with this method (upper-case), this path (as
 * {@link normalizePath} makes it) or this host (a `host` key part's: lower-case, without port or
 * trailing dot): what a key an operator names for the rule (an override's) is checked against.
 */
export function matchFits(rule: Rule, part: "method" | "path" | "host", value: string): boolean {
  const match = compiledMatch(rule);
  if (part === "method") return match.methods === null || match.methods.has(value);
  if (part === "path") return pathFits(match, value, routedPath(value));
  return match.host === null || stripPort(match.host) === value;
}

/**
 * The methods with HEAD wherever GET is: origins (Express, Hono, ASP.NET) answer a HEAD with their
 * GET handler, so a rule limiting GET that let HEAD through would leave that work unlimited.
 */
function withHead(methods: Set<string>): Set<string> {
  if (methods.has("GET")) methods.add("HEAD");
  return methods;
}

function compiledMatch(rule: Rule): CompiledMatch {
  let match = compiled.get(rule);
  if (match === undefined) {
    const host = rule.match.host === null ? null : normalizeHost(rule.match.host);
    const path = compileGlob(rule.match.path);
    const routed = WRITTEN.test(rule.match.path) ? null : routedPath(rule.match.path);
    match = {
      path,
      routed: routed === null ? null : routed === rule.match.path ? path : compileGlob(routed),
      // The parser upper-cases methods already; doing it here too keeps hand-built rules honest.
      methods: rule.match.methods === null ? null : withHead(new Set(rule.match.methods.map((m) => m.toUpperCase()))),
      host,
      hostHasPort: host !== null && stripPort(host) !== host,
    };
    compiled.set(rule, match);
  }
  return match;
}

/**
 * The request's host with its port: the scheme's default port written out, which the URL leaves
 * out, so that a rule on `api.example.com:443` matches the HTTPS requests to that host.
 */
export function hostOf(url: URL): string {
  return url.port !== "" ? url.host : `${url.host}:${url.protocol === "https:" || url.protocol === "wss:" ? 443 : 80}`;
}

/**
 * The host a `host` key part counts: lower-cased, without a port or a trailing dot, so that
 * `API.example.com.` and `api.example.com:443`, one host to any origin, share one quota.
 */
export function hostKey(host: string): string {
  return stripPort(normalizeHost(host));
}

function normalizeHost(host: string): string {
  const lower = host.toLowerCase();
  const name = stripPort(lower);
  // Every trailing dot: the URL parser takes `api.example.com..` too, and it must not dodge a rule either.
  return (name.replace(/\.+$/, "") || name) + lower.slice(name.length);
}

/** `example.com:8787` → `example.com`; `[::1]:8787` → `[::1]`: IPv6 literals come bracketed, as in URLs. */
function stripPort(host: string): string {
  const colon = host.lastIndexOf(":");
  return colon === -1 || colon < host.lastIndexOf("]") ? host : host.slice(0, colon);
}
