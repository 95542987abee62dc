/** A rule's `match`: which requests it applies to, by path glob, methods, host and client addresses. */
import { parseIpList } from "../routing/cidr";
import { pathAsMatched } from "../routing/path";
import { show, type RuleRef } from "./errors";
import { fail, fieldsOf, given, isObject, rejectUnknown, TOKEN } from "./fields";
import type { Rule } from "./types";

const MATCH_FIELDS = ["path", "methods", "host", "ips"];
const HOST = /^[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::([0-9]{1,5}))?$/i;

export function parseMatch(value: unknown, at: RuleRef): Rule["match"] {
  if (value === undefined) return { path: "*", methods: null, host: null, ips: null };
  if (!isObject(value)) {
    fail(at, "match", `expected an object like {"path": "/api/*", "methods": ["GET"]}, got ${show(value)}`);
  }
  const fields = fieldsOf(value);
  rejectUnknown(fields, MATCH_FIELDS, at, "match");
  return {
    path: parsePath(fields.get("path"), at),
    methods: parseMethods(fields.get("methods"), at),
    host: parseHost(fields.get("host"), at),
    ips: given(fields, "ips") ? parseIpList(fields.get("ips") as readonly string[], { field: "match.ips", rule: at }) : null,
  };
}

function parsePath(value: unknown, at: RuleRef): string {
  const field = "match.path";
  const form = `a glob starting with "/", like "/api/*", or "*" for every path`;
  if (value === undefined) return "*";
  if (typeof value !== "string") fail(at, field, `expected ${form}, got ${show(value)}`);
  if (value === "") fail(at, field, `must not be empty; write ${form}`);
  if (/[\s\p{Cc}]/u.test(value)) {
    fail(at, field, `must not contain whitespace or control characters, got ${show(value)}`);
  }
  const cut = /[?#]/.exec(value);
  if (cut !== null) {
    const fix = `remove "${cut[0]}" and what follows from ${show(value)}`;
    fail(at, field, `globs match the path only, not the query string or fragment; ${fix}`);
  }
  if (value !== "*" && !value.startsWith("/")) fail(at, field, `expected ${form}, got ${show(value)}`);
  if (/[\uD800-\uDFFF]/u.test(value)) fail(at, field, `must be well-formed Unicode (it holds a lone surrogate), got ${show(value)}`);
  const matched = value === "*" ? value : pathAsMatched(value, { glob: true });
  if (matched !== value) fail(at, field, `${show(value)} never matches: request paths are matched percent-encoded (escapes upper-case; letters, digits, -._~ and []^| unescaped; a % that starts no escape as %25), with "." and ".." segments resolved; write ${show(matched)}`);
  return value;
}

function parseMethods(value: unknown, at: RuleRef): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0) {
    const form = `a non-empty array of HTTP methods like ["GET", "POST"] (leave it out for every method)`;
    fail(at, "match.methods", `expected ${form}, got ${show(value)}`);
  }
  const methods = Array.from(value, (method: unknown, i) => {
    if (typeof method !== "string" || !TOKEN.test(method)) {
      fail(at, `match.methods[${i}]`, `expected an HTTP method like "GET", got ${show(method)}`);
    }
    return method.toUpperCase();
  });
  return [...new Set(methods)];
}

function parseHost(value: unknown, at: RuleRef): string | null {
  if (value === undefined || value === null) return null;
  const port = typeof value === "string" ? HOST.exec(value)?.[1] : undefined;
  const valid = typeof value === "string" && HOST.test(value) && (port === undefined || isPort(Number(port)));
  if (!valid) {
    const form = `a host name like "api.example.com", optionally with ":port" (leave it out for every host)`;
    fail(at, "match.host", `expected ${form}, got ${show(value)}`);
  }
  const host = value.toLowerCase();
  const written = asParsed(port === undefined ? host : host.slice(0, -(port.length + 1)), port);
  if (written !== host) fail(at, "match.host", `${show(value)} never matches: a request's host is matched as the URL parser writes it; write ${show(written)}`);
  return host;
}

/**
 * A host and port as the URL parser writes a request's (`127.1` is `127.0.0.1`, port `080` is
 * `80`). A host the parser refuses is taken as written: Node's parser (the deploy check's) and
 * workerd's disagree on some (`xn--ss-.example`), and a rule refused only by the Worker would
 * answer every request with the configuration's 500.
 */
function asParsed(name: string, port: string | undefined): string {
  const portPart = port === undefined ? "" : `:${Number(port)}`;
  try {
    return new URL(`http://${name}/`).hostname + portPart;
  } catch {
    return name + portPart;
  }
}

function isPort(port: number): boolean {
  return port >= 1 && port <= 65_535;
}
