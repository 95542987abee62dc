/** A rule's `key`: the parts of a request its counter is named by, and how IPv6 clients are grouped. */
import { show, type RuleRef } from "./errors";
import { fail, TOKEN } from "./fields";
import type { KeyPart } from "./types";

const PLAIN_PARTS = ["ip", "path", "method", "host", "global", "asn", "country"] as const;
const KEY_PARTS_HINT = "ip, path, method, host, global, asn, country, header:<name>, query:<name> or cookie:<name>";
/** The prefix most ISPs delegate to one customer (RFC 6177), and express-rate-limit's default. */
export const DEFAULT_IPV6_PREFIX = 56;
/** Shorter prefixes than this would group whole providers, longer than 128 bits there are none. */
const IPV6_PREFIX_RANGE = [32, 128] as const;

export function parseKey(value: unknown, at: RuleRef): KeyPart[] {
  if (value === undefined) return [{ source: "ip" }];
  if (typeof value === "string") return [parseKeyPart(value, at, "key")];
  if (!Array.isArray(value) || value.length === 0) {
    const form = `a key part like "ip" or "header:x-api-key", or a non-empty array of them`;
    fail(at, "key", `expected ${form}, got ${show(value)}`);
  }
  const parts = Array.from(value, (part: unknown, i) => parseKeyPart(part, at, `key[${i}]`));
  rejectRepeatedParts(parts, at);
  return parts;
}

function parseKeyPart(value: unknown, at: RuleRef, field: string): KeyPart {
  if (typeof value !== "string") fail(at, field, `expected a key part (${KEY_PARTS_HINT}), got ${show(value)}`);
  const plain = PLAIN_PARTS.find((source) => source === value);
  if (plain !== undefined) return { source: plain };
  const colon = value.indexOf(":");
  const source = colon === -1 ? value : value.slice(0, colon);
  const name = colon === -1 ? "" : value.slice(colon + 1);
  const got = `, got ${show(value)}`;
  switch (source) {
    case "header":
      if (!TOKEN.test(name)) fail(at, field, `expected "header:<name>" with a header name like "x-api-key"${got}`);
      return { source, name: name.toLowerCase() };
    case "query":
      if (name === "") fail(at, field, `expected "query:<name>" with a parameter name, e.g. "query:api_key"${got}`);
      return { source, name };
    case "cookie":
      if (!TOKEN.test(name)) fail(at, field, `expected "cookie:<name>" with a cookie name like "session"${got}`);
      return { source, name };
  }
  fail(at, field, `unknown key part ${show(value)}; use ${KEY_PARTS_HINT}`);
}

function rejectRepeatedParts(parts: KeyPart[], at: RuleRef): void {
  const firstAt = new Map<string, number>();
  parts.forEach((part, i) => {
    const text = formatKeyPart(part);
    const first = firstAt.get(text);
    if (first !== undefined) fail(at, `key[${i}]`, `repeats key[${first}] (${show(text)}); list each part once`);
    firstAt.set(text, i);
  });
}

export function parseIpv6Prefix(value: unknown, key: KeyPart[], at: RuleRef): number {
  if (value === undefined) return DEFAULT_IPV6_PREFIX;
  if (!hasIpPart(key)) fail(at, "ipv6Prefix", `ipv6Prefix applies to rules whose key has an "ip" part; remove it, or add "ip" to the key`);
  if (!isIpv6Prefix(value)) fail(at, "ipv6Prefix", `expected ${IPV6_PREFIX_WANTED}, got ${show(value)}`);
  return value;
}

/** Whether `value` is a prefix length a rule may group IPv6 clients by. */
export function isIpv6Prefix(value: unknown): value is number {
  const [min, max] = IPV6_PREFIX_RANGE;
  return Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max;
}

/** What an ipv6Prefix must be, as its errors say. */
export const IPV6_PREFIX_WANTED = `a prefix length from ${IPV6_PREFIX_RANGE[0]} to ${IPV6_PREFIX_RANGE[1]} (default ${DEFAULT_IPV6_PREFIX}, a /56)`;

export function hasIpPart(key: readonly KeyPart[]): boolean {
  return key.some((part) => part.source === "ip");
}

export function formatKeyPart(part: KeyPart): string {
  return "name" in part ? `${part.source}:${part.name}` : part.source;
}
