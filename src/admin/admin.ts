/** The admin API under /__floodgate/: rules, state peek and reset, metrics (bearer token required), and the status page that reads them. */
import type { Settings } from "../config";
import { ConfigError } from "../config/errors";
import { ruleForKey } from "../config/overrides";
import { describeQuota, describeRule } from "../config/rules";
import type { Rule } from "../config/types";
import type { Env } from "../env";
import { failureResponse } from "../http/failure";
import { HttpProblem, invalidRequest, notFound, unauthorized } from "../http/problem";
import { log } from "../metrics/log";
import { metrics } from "../metrics/metrics";
import { localView } from "../fast";
import { forget, standing } from "../limiter";
import { durableObjectName, namedObject } from "../routing/key";
import { canonicalKey, isHashedName, UnbuildableKeyError } from "../routing/key-text";
import { normalizePath } from "../routing/path";
import { TimeoutError } from "../strict/timeout";
import { statusPage } from "./page";

export const ADMIN_PREFIX = "/__floodgate/";

/** `/__floodgate`, alone or before "/" (or its escape), in any case, after any run of slashes. */
const ADMIN_PATH = /^\/+__floodgate(?:$|\/|%2F)/i;

/**
 * Whether a request is the admin API's: its prefix however written (`/__FLOODGATE/rules`,
 * `/%5f%5ffloodgate/rules`, `/__floodgate` without its slash), so that a mistyped admin call is
 * answered here, a 404 at worst, and never forwarded to the origin with the admin's token.
 */
export function isAdminPath(pathname: string): boolean {
  return ADMIN_PATH.test(normalizePath(pathname));
}

const UNSENDABLE_TOKEN =
  "ADMIN_TOKEN: holds whitespace, control or non-ASCII characters, which an Authorization: Bearer header cannot carry, so no call can sign in; set a token of letters, digits and -._~+/= (openssl rand -base64 32)";

/**
 * Answers an admin call. Without ADMIN_TOKEN the API does not exist (404); without the right
 * bearer token it answers 401 and nothing else, whatever the path. The one exception is the status
 * page at `GET /__floodgate/`: a browser cannot send the token when it navigates, so the page is
 * served to anyone, holds no data, and reads the API with the token the admin types in. The
 * settings are read once the token is checked, so an invalid configuration reaches the admin only.
 */
export async function handleAdmin(request: Request, env: Env, settingsOf: () => Settings): Promise<Response> {
  // HEAD is GET without the body (RFC 9110).
  const head = request.method === "HEAD";
  const answer = await answerAdmin(head ? new Request(request, { method: "GET" }) : request, env, settingsOf).catch(failureResponse);
  // Rules, a key's state and the counters are the admin's, and so is an invalid configuration's 500: no cache, not even the browser's own, keeps them.
  const headers = new Headers(answer.headers);
  headers.set("Cache-Control", "no-store");
  headers.set("X-Content-Type-Options", "nosniff");
  return new Response(head ? null : answer.body, { status: answer.status, statusText: answer.statusText, headers });
}

async function answerAdmin(request: Request, env: Env, settingsOf: () => Settings): Promise<Response> {
  if (!env.ADMIN_TOKEN) return notFound().toResponse();
  const url = new URL(request.url);
  if (request.method === "GET" && url.pathname === ADMIN_PREFIX) return statusPage();
  if (!(await bearerMatches(request.headers.get("Authorization"), env.ADMIN_TOKEN))) {
    // A token no Authorization header can carry locks the admin out: the log says why, the caller hears no more than any other 401.
    if (/[^\x21-\x7e]/.test(env.ADMIN_TOKEN)) log.event("error", { kind: "config", message: UNSENDABLE_TOKEN }, Date.now());
    // Counted and logged so a guesser shows (nothing of what was sent: it may be a mistyped token).
    metrics.count("floodgate_admin_refusals_total");
    log.event("admin_refused", { status: 401 }, Date.now());
    return unauthorized().toResponse();
  }
  // Only the prefix as documented names a call; another spelling of it is answered as an unknown call.
  const path = url.pathname.startsWith(ADMIN_PREFIX) ? url.pathname.slice(ADMIN_PREFIX.length) : undefined;
  const allowed = path === undefined ? undefined : METHODS.get(path);
  if (allowed && !allowed.includes(request.method)) return methodNotAllowed(request.method, path!, allowed);
  const route = path === undefined ? "" : `${request.method} ${path}`;
  // The counters answer while the configuration is invalid too, its errors among them: a scrape that
  // failed with it saw nothing of the requests it was failing.
  if (route === "GET metrics") return new Response(metrics.render(rulesIfValid(settingsOf)), { headers: { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" } });
  // Read only now: an invalid configuration is the admin's to see (it throws its ConfigError), no one else's.
  const settings = settingsOf();
  switch (route) {
    case "GET rules":
      return Response.json({ rules: settings.rules.map(describeRule) });
    case "GET state":
    case "DELETE state":
      return state(request.method, url, env, settings);
    default:
      return notFound().toResponse();
  }
}

/** The methods of each call under the prefix (HEAD answered as GET): another method on one is a 405 that lists them. */
const METHODS: ReadonlyMap<string, readonly string[]> = new Map([
  ["", ["GET", "HEAD"]],
  ["rules", ["GET", "HEAD"]],
  ["metrics", ["GET", "HEAD"]],
  ["state", ["GET", "HEAD", "DELETE"]],
]);

function methodNotAllowed(method: string, path: string, allowed: readonly string[]): Response {
  const allow = allowed.join(", ");
  // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
  return new HttpProblem({ type: "about:blank", status: 405, title: "Method Not Allowed", detail: `${method} is not a method of ${ADMIN_PREFIX}${path}; it takes ${allow}`, headers: { Allow: allow } }).toResponse();
}

/** The configuration's rules, or none while it is invalid. */
function rulesIfValid(settingsOf: () => Settings): readonly Rule[] {
  try {
    return settingsOf().rules;
  } catch (error) {
    if (error instanceof ConfigError) return [];
    throw error;
  }
}

/** `?rule=<name>&key=<key>`: peeks at (GET) or resets (DELETE) one key's object. */
async function state(method: string, url: URL, env: Env, settings: Settings): Promise<Response> {
  const [ruleName, typed] = [onlyParam(url, "rule"), onlyParam(url, "key")];
  // floodgate never builds an empty key (a missing part is "#none"): an empty one is a mistake, not a key to reset.
  if (!ruleName || !typed) throw invalidRequest("state needs ?rule=<name>&key=<key>, each once and neither empty");
  const rule = settings.rules.find((r) => r.name === ruleName);
  if (!rule) throw new HttpProblem({ type: "about:blank", status: 404, title: "Not Found", detail: `no rule named ${JSON.stringify(ruleName)}` });
  // A client's address as typed is the key its requests are counted under: the answer names that key.
  const key = keyFor(rule, typed);
  const objectName = await namedObject(rule.name, key);
  if (method === "DELETE") {
    await forget(env.LIMITER, rule, objectName).catch(objectFailed(rule, "the reset may still be applied: read the key's state, or reset it again"));
    return Response.json({ rule: rule.name, key, reset: true });
  }
  const keyed = await ruleOfObject(rule, key, objectName);
  const state = await standing(env.LIMITER, keyed, objectName).catch(objectFailed(keyed, "try again"));
  // Fast keys also have what this isolate holds: units leased to it, and units on their way back.
  const isolate = rule.mode === "fast" ? localView(env.LIMITER, objectName) ?? null : undefined;
  return Response.json({ rule: rule.name, key, ...(keyed === rule ? {} : { override: describeQuota(keyed) }), state, ...(isolate === undefined ? {} : { isolate }) });
}

/**
 * A 504 for a key's object that did not answer within the rule's timeout, a 502 for one that
 * failed, each saying what to do: a slow or failing object is the admin's to hear of, no failure
 * of floodgate's own (which a 500 would say).
 */
function objectFailed(rule: Rule, then: string): (error: unknown) => never {
  return (error) => {
    if (error instanceof TimeoutError) throw new HttpProblem({ type: "about:blank", status: 504, title: "Gateway Timeout", detail: `the key's object did not answer within the rule's timeout (${rule.timeoutMs}ms); ${then}` });
    const message = error instanceof Error ? error.message : String(error);
    throw new HttpProblem({ type: "about:blank", status: 502, title: "Bad Gateway", detail: `the key's object failed (${message}); ${then}` });
  };
}

/**
 * The rule a key is decided under: with its override, if the rule's `overrides` name it. A key past
 * 1 KB may be typed as its object's `#sha256` name, which finds the override whose key has that name.
 */
async function ruleOfObject(rule: Rule, key: string, objectName: string): Promise<Rule> {
  if (!isHashedName(key)) return ruleForKey(rule, key);
  for (const named of rule.overrides?.keys() ?? []) {
    if ((await durableObjectName(rule.name, named)) === objectName) return ruleForKey(rule, named);
  }
  return rule;
}

/** The query parameter's value when it is given once; undefined when it is missing or repeated (which of two would a reset mean?). */
function onlyParam(url: URL, name: string): string | undefined {
  const values = url.searchParams.getAll(name);
  return values.length === 1 ? values[0] : undefined;
}

/** The key as the rule builds it, or a 400 saying how to write it: a key no request could have names an object no request uses. */
function keyFor(rule: Rule, typed: string): string {
  try {
    return canonicalKey(rule, typed);
  } catch (error) {
    if (error instanceof UnbuildableKeyError) throw invalidRequest(`key: ${error.message}; see the README's Keys for how floodgate builds a key`);
    throw error;
  }
}

/**
 * Compares the presented bearer token with the configured one in constant time: both are hashed
 * first, so neither their contents nor their lengths show in the timing.
 */
async function bearerMatches(header: string | null, token: string): Promise<boolean> {
  const presented = /^Bearer +(\S+) *$/i.exec(header ?? "")?.[1] ?? "";
  const [a, b] = await Promise.all([digest(presented), digest(token)]);
  return crypto.subtle.timingSafeEqual(a, b) && presented.length > 0;
}

async function digest(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
}
