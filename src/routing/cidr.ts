/** Lists of IP addresses and CIDRs (`match.ips`, `ALLOW_IPS`, `DENY_IPS`): parsed once, matched per request without allocating. */
import { ConfigError, show, type RuleRef } from "../config/errors";
import { formatIpv6, isIpv4Mapped, parseAddress } from "./ip";

/** Where a list comes from, for its error messages. */
export interface IpListSource {
  /** `match.ips` inside a rule, or a top-level name such as `DENY_IPS` */
  readonly field: string;
  /** the rule holding the field; leave it out for a top-level var or option */
  readonly rule?: RuleRef;
}

/** A parsed list of addresses and CIDRs. */
export interface IpList {
  /**
   * Whether a client address (a `CF-Connecting-IP` value) is in the list. An IPv4-mapped IPv6
   * address is its IPv4 address; anything that is not an address (null, `""`, a CIDR, a name,
   * surrounding spaces) is in no list. Allocates nothing.
   */
  has(address: string | null | undefined): boolean;
  /**
   * Whether some address of `network` (an address, or a CIDR as the `ip` key part writes an IPv6
   * client's network: `2001:db8:abcd:1200::/56`) is in the list; false for anything else. For
   * checking configuration: it allocates.
   */
  overlaps(network: string): boolean;
  /** the entries as written, trimmed, in order */
  readonly entries: readonly string[];
  /** {@link entries}, so a rule holding a list serializes as it was written */
  toJSON(): readonly string[];
}

const FORM = `an IP address or CIDR like "203.0.113.7", "203.0.113.0/24" or "2001:db8::/32"`;

/** The 8 groups of the address being parsed: one per isolate, as in ./ip, so `has` allocates none. */
const groups = new Uint16Array(8);
/** The address being looked up as 32-bit words: [0] for IPv4, [0..3] for IPv6. */
const key = new Uint32Array(4);

/**
 * Parses a list of IPv4/IPv6 addresses and CIDRs, once, at configuration time; throws a
 * {@link ConfigError} naming the field, the entry and what to write instead.
 *
 * `entries` is an array (a rule's `match.ips`; an error names `match.ips[2]`) or a comma-separated
 * string (the `ALLOW_IPS` / `DENY_IPS` vars; an error names the var and quotes the entry). Whitespace
 * around an entry is ignored. Each entry is an address as {@link parseAddress} reads it, optionally
 * followed by `/` and a prefix length (0-32 for IPv4, 0-128 for IPv6, decimal without leading
 * zeros); an address alone is its /32 or /128. An IPv4-mapped entry with a prefix of 96 or more
 * (`::ffff:192.0.2.0/120`) is its IPv4 equivalent (`192.0.2.0/24`).
 *
 * Rejected: an empty list, an empty entry (`"a,,b"`, a trailing comma), a malformed address or
 * prefix, and a CIDR with bits set after its prefix. `10.0.0.1/8` is far more often a slip (for
 * `10.0.0.1` or `10.0.0.0/8`, or `/8` for `/28`) than a wish for all of 10/8, and masking it
 * silently would put 16 million addresses on an allow list; the error names both readings.
 *
 * A list holds IPv4 and IPv6 apart. An IPv6 range below /96 that spans `::ffff:0:0/96` (`::/0`,
 * `::/80`) matches IPv6 clients only: an IPv4-mapped client is its IPv4 address, so only IPv4
 * entries (or IPv4-mapped ones with /96 or more) match it, exactly as they match that client
 * connecting over IPv4.
 *
 * How it matches: each family's CIDRs become address intervals, sorted and merged so that they
 * are disjoint and not adjacent, stored as 32-bit words in two typed arrays (starts and ends; one
 * word an address for IPv4, four for IPv6). `has` parses the client into a module-level buffer and
 * binary-searches for the last interval starting at or before it: O(log n) word comparisons, no
 * allocation, no BigInt. Merging is what makes that one search enough: with `10.0.0.0/8` and
 * `10.1.0.0/16` unmerged, `10.2.0.0` would find the /16 and miss the /8. A trie would do the
 * same in O(prefix bits) with more memory and more code; a linear scan of CIDRs would do it in
 * O(n), fine for ten entries but not for a deny list of thousands.
 *
 * @example
 * const deny = parseIpList("203.0.113.0/24, 2001:db8::/32", { field: "DENY_IPS" });
 * deny.has("203.0.113.9");           // true
 * deny.has("::ffff:203.0.113.9");    // true
 * deny.has("2001:db8:1::1");         // true
 * deny.has("2001:db9::1");           // false
 * deny.has(null);                    // false
 * parseIpList(["10.0.0.1/8"], { field: "match.ips", rule: { index: 0, name: "api" } });
 * // throws: rules[0] ("api").match.ips[0]: "10.0.0.1/8" has bits set after its /8 prefix; …
 */
export function parseIpList(entries: readonly string[] | string, source: IpListSource): IpList {
  const fromString = typeof entries === "string";
  const fail = (problem: string, index?: number) => {
    const field = fromString || index === undefined ? source.field : `${source.field}[${index}]`;
    return source.rule === undefined ? ConfigError.topLevel(problem, field) : ConfigError.inRule(source.rule, field, problem);
  };
  const none = source.rule === undefined ? "leave it unset for none" : "leave it out to match every address";
  if (!fromString && !Array.isArray(entries)) {
    const like = source.rule === undefined ? `a comma-separated list of IP addresses and CIDRs like "203.0.113.0/24, 2001:db8::/32" (or an array of them)` : `an array of IP addresses and CIDRs like ["203.0.113.0/24", "2001:db8::/32"]`;
    throw fail(`expected ${like} (${none}), got ${show(entries)}`);
  }
  const texts = fromString ? entries.split(",") : entries;
  if (texts.length === 0 || (fromString && entries.trim() === "")) {
    throw fail(`expected at least one entry, ${FORM} (${none}), got ${fromString ? show(entries) : "an empty array"}`);
  }
  const v4 = new RangesBuilder(1);
  const v6 = new RangesBuilder(4);
  const written: string[] = [];
  for (let i = 0; i < texts.length; i++) {
    const raw: unknown = texts[i];
    if (typeof raw !== "string") throw fail(`expected ${FORM}, got ${show(raw)}`, i);
    const text = raw.trim();
    if (text === "") {
      if (!fromString) throw fail(`expected ${FORM}, got ""`, i);
      throw fail(`entry ${i + 1} of ${texts.length} is empty; separate entries with single commas, like "203.0.113.0/24, 2001:db8::/32"`, i);
    }
    const problem = addEntry(text, v4, v6);
    if (problem !== null) throw fail(problem, i);
    written.push(text);
  }
  return new SortedIpList(v4.build(), v6.build(), written);
}

/** Adds one trimmed entry to its family's ranges; what is wrong with it, or null. */
function addEntry(text: string, v4: RangesBuilder, v6: RangesBuilder): string | null {
  const read = readCidr(text);
  if (read.family === 0) return `expected ${FORM}, got ${show(text)}`;
  const { family, prefix, words, wordPrefix } = read;
  if (prefix < 0) {
    const v = family === 4 ? "IPv4" : "IPv6";
    return `${show(text)} has a bad prefix length: after "/" write a whole number from 0 to ${family === 4 ? 32 : 128} for ${v}, like "${family === 4 ? "203.0.113.0/24" : "2001:db8::/32"}"`;
  }
  const start = masked(words, wordPrefix);
  if (start.some((word, k) => word !== words[k])) {
    const network = words.length === 4 ? formatIpv6(groupsOf(start)) : family === 4 ? dotted(start[0]!) : `::ffff:${dotted(start[0]!)}`;
    const address = text.slice(0, text.indexOf("/"));
    return `${show(text)} has bits set after its /${prefix} prefix; write "${network}/${prefix}" for the network, or "${address}" alone for the one address`;
  }
  (words.length === 1 ? v4 : v6).add(start, lastIn(start, wordPrefix));
  return null;
}

/**
 * An address or CIDR as read: its family (0: not an address), its prefix length (-1: malformed;
 * an address alone is its /32 or /128), and its address in its family's 32-bit words with the
 * prefix over them (an IPv4-mapped one with a prefix of 96 or more as IPv4).
 */
function readCidr(text: string): { family: 0 } | { family: 4 | 6; prefix: number; words: number[]; wordPrefix: number } {
  const slash = text.indexOf("/");
  const family = parseAddress(slash < 0 ? text : text.slice(0, slash), groups);
  if (family === 0) return { family };
  const bits = family === 4 ? 32 : 128;
  const prefix = slash < 0 ? bits : prefixLength(text.slice(slash + 1), bits);
  const mapped = family === 6 && isIpv4Mapped(groups) && prefix >= 96;
  const words = family === 4 || mapped ? [groups[6]! * 0x10000 + groups[7]!] : wordsOf(groups);
  return { family, prefix, words, wordPrefix: mapped ? prefix - 96 : prefix };
}

/** A prefix length written after `/`: decimal digits without a leading zero, at most `bits`; -1 otherwise. */
function prefixLength(text: string, bits: number): number {
  if (text.length === 0 || text.length > 3 || (text.length > 1 && text.charCodeAt(0) === 0x30)) return -1;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return -1;
    n = n * 10 + (c - 0x30);
  }
  return n <= bits ? n : -1;
}

/** The mask keeping the first `kept` bits of a 32-bit word (any `kept`, clamped to 0-32). */
function wordMask(kept: number): number {
  if (kept <= 0) return 0;
  if (kept >= 32) return 0xffffffff;
  return (0xffffffff << (32 - kept)) >>> 0;
}

/** The first address of the /`prefix` holding `words`. */
function masked(words: readonly number[], prefix: number): number[] {
  return words.map((word, k) => (word & wordMask(prefix - 32 * k)) >>> 0);
}

/** The last address of the /`prefix` starting at `start`. */
function lastIn(start: readonly number[], prefix: number): number[] {
  return start.map((word, k) => (word | ~wordMask(prefix - 32 * k)) >>> 0);
}

function wordsOf(g: Uint16Array): number[] {
  return [g[0]! * 0x10000 + g[1]!, g[2]! * 0x10000 + g[3]!, g[4]! * 0x10000 + g[5]!, g[6]! * 0x10000 + g[7]!];
}

function groupsOf(words: readonly number[]): Uint16Array {
  return Uint16Array.from(words.flatMap((word) => [word >>> 16, word & 0xffff]));
}

function dotted(word: number): string {
  return `${word >>> 24}.${(word >>> 16) & 0xff}.${(word >>> 8) & 0xff}.${word & 0xff}`;
}

/** Compares two addresses of `width` words: negative, 0 or positive. */
function compare(a: readonly number[], b: readonly number[], width: number): number {
  for (let k = 0; k < width; k++) {
    const d = a[k]! - b[k]!;
    if (d !== 0) return d;
  }
  return 0;
}

/** Whether `next` is the address right after `last`. */
function follows(last: readonly number[], next: readonly number[]): boolean {
  let carry = 1;
  for (let k = last.length - 1; k >= 0; k--) {
    const sum = last[k]! + carry;
    carry = sum > 0xffffffff ? 1 : 0;
    if (sum - carry * 0x1_0000_0000 !== next[k]) return false;
  }
  return carry === 0;
}

/** One family's disjoint, non-adjacent intervals, sorted; `width` 32-bit words an address. */
interface Ranges {
  readonly width: number;
  readonly starts: Uint32Array;
  readonly ends: Uint32Array;
}

/** Collects one family's intervals, then sorts and merges them into {@link Ranges}. */
class RangesBuilder {
  private readonly intervals: [start: number[], end: number[]][] = [];

  constructor(private readonly width: number) {}

  add(start: number[], end: number[]): void {
    this.intervals.push([start, end]);
  }

  build(): Ranges {
    const width = this.width;
    const sorted = this.intervals.sort(([a], [b]) => compare(a, b, width));
    const merged: [number[], number[]][] = [];
    for (const [start, end] of sorted) {
      const last = merged[merged.length - 1];
      if (last !== undefined && (compare(start, last[1], width) <= 0 || follows(last[1], start))) {
        if (compare(end, last[1], width) > 0) last[1] = end;
      } else {
        merged.push([start, end]);
      }
    }
    return {
      width,
      starts: Uint32Array.from(merged.flatMap(([start]) => start)),
      ends: Uint32Array.from(merged.flatMap(([, end]) => end)),
    };
  }
}

/** Whether the address in {@link key} lies in one of `ranges`' intervals: a binary search. */
function within(ranges: Ranges): boolean {
  const { width, starts, ends } = ranges;
  // the first interval starting after the address; the one before it is the only candidate
  let low = 0;
  let high = starts.length / width;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (compareKey(starts, mid * width, width) > 0) high = mid;
    else low = mid + 1;
  }
  return low > 0 && compareKey(ends, (low - 1) * width, width) >= 0;
}

/** {@link compare} against {@link key}, kept apart so that the per-request path sees typed arrays only. */
function compareKey(words: Uint32Array, at: number, width: number): number {
  for (let k = 0; k < width; k++) {
    const d = words[at + k]! - key[k]!;
    if (d !== 0) return d;
  }
  return 0;
}

class SortedIpList implements IpList {
  constructor(
    private readonly v4: Ranges,
    private readonly v6: Ranges,
    readonly entries: readonly string[],
  ) {}

  has(address: string | null | undefined): boolean {
    if (typeof address !== "string") return false;
    const family = parseAddress(address, groups);
    if (family === 0) return false;
    if (isIpv4Mapped(groups)) {
      // a dotted quad, or the same address IPv4-mapped: parseAddress fills both alike
      key[0] = groups[6]! * 0x10000 + groups[7]!;
      return within(this.v4);
    }
    for (let k = 0; k < 4; k++) key[k] = groups[2 * k]! * 0x10000 + groups[2 * k + 1]!;
    return within(this.v6);
  }

  overlaps(network: string): boolean {
    const range = rangeOf(network);
    if (range === null) return false;
    const ranges = range.start.length === 1 ? this.v4 : this.v6;
    const { width, starts, ends } = ranges;
    for (let i = 0; i < starts.length; i += width) {
      if (compare(Array.from(starts.subarray(i, i + width)), range.end, width) <= 0 && compare(Array.from(ends.subarray(i, i + width)), range.start, width) >= 0) return true;
    }
    return false;
  }

  toJSON(): readonly string[] {
    return this.entries;
  }
}

/** The first and last address of an address or CIDR, in its family's words (see {@link readCidr}); null when it is neither. */
function rangeOf(text: string): { start: number[]; end: number[] } | null {
  const read = readCidr(text);
  if (read.family === 0 || read.prefix < 0) return null;
  const start = masked(read.words, read.wordPrefix);
  return { start, end: lastIn(start, read.wordPrefix) };
}
