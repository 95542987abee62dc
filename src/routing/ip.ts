/** Client addresses: the one strict IPv4/IPv6 parser, and an address as an `ip` key value. */

/** The longest text an IPv6 address can take: six 4-digit groups, then a dotted quad. */
const MAX_IPV6_TEXT = 45;

/**
 * The 8 groups of the address {@link ipKey} is keying. One per isolate: parsing is synchronous and
 * every call fills it before reading it, so no call sees another's groups, and a request allocates none.
 */
const groups = new Uint16Array(8);

/** What {@link parseAddress} read: 4 for a dotted quad, 6 for IPv6 text, 0 for anything else. */
export type AddressFamily = 0 | 4 | 6;

/**
 * Parses a client address strictly into `out` (8 groups of 16 bits, most significant first) and
 * says which text form it was; allocates nothing.
 *
 * - 4: a dotted quad of decimal octets 0-255 without leading zeros; `out` holds it IPv4-mapped
 *   (`::ffff:a.b.c.d`), so both forms of one IPv4 address fill `out` alike.
 * - 6: RFC 4291 text in any form (full, `::`-compressed, either case, a dotted quad in the last
 *   32 bits), IPv4-mapped included: {@link isIpv4Mapped} tells those apart.
 * - 0: anything else, and `out` holds garbage: no surrounding whitespace, zone id (`%eth0`),
 *   brackets, port or prefix; no hex, octal or shortened IPv4 (`0x7f.1`, `01.2.3.4`, `127.1`).
 *
 * One pass over at most 45 characters, without regexes or splitting.
 *
 * @example
 * const out = new Uint16Array(8);
 * parseAddress("192.0.2.7", out);        // 4, out = [0, 0, 0, 0, 0, 0xffff, 0xc000, 0x0207]
 * parseAddress("::FFFF:192.0.2.7", out); // 6, out as above
 * parseAddress("2001:db8::1", out);      // 6, out = [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]
 * parseAddress("2001:db8::/32", out);    // 0
 */
export function parseAddress(text: string, out: Uint16Array): AddressFamily {
  const v4 = ipv4At(text, 0);
  if (v4 >= 0) {
    out.fill(0, 0, 5);
    out[5] = 0xffff;
    out[6] = Math.floor(v4 / 0x10000);
    out[7] = v4 % 0x10000;
    return 4;
  }
  return parseIpv6(text, out) ? 6 : 0;
}

/** Whether 8 groups are an IPv4-mapped IPv6 address (`::ffff:0:0/96`), whose IPv4 is the last two. */
export function isIpv4Mapped(g: Uint16Array): boolean {
  return g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff;
}

/**
 * The `ip` key value for a `CF-Connecting-IP` value, or null when it is not an address.
 *
 * - IPv4: a dotted quad of decimal octets 0-255 without leading zeros; the value as is.
 * - IPv4-mapped IPv6 (`::ffff:0:0/96`, in any text form): its IPv4 address, so a client does not
 *   get a second quota by switching stacks.
 * - Other IPv6, in any RFC 4291 text form (full, `::`-compressed, either case, a dotted quad in
 *   the last 32 bits): the first `ipv6Prefix` bits (0-128; rules allow 32-128), the rest zeroed,
 *   in RFC 5952 form, then `/<ipv6Prefix>`, also for /128, so every IPv6 key has one shape.
 *
 * Anything else is not an address: no surrounding whitespace (`clientAddress` in ./key trims the header's),
 * zone id (`%eth0`), brackets or port; no hex, octal or shortened IPv4 (`0x7f.1`, `01.2.3.4`,
 * `127.1`). Parsing is one pass over at most 45 characters, without regexes or splitting.
 *
 * @example
 * ipKey("203.0.113.9", 56);                // "203.0.113.9"
 * ipKey("::FFFF:203.0.113.9", 56);         // "203.0.113.9"
 * ipKey("2001:DB8:ABCD:12FF::1", 56);      // "2001:db8:abcd:1200::/56"
 * ipKey("2001:0db8:0:0:0:0:0:0001", 128);  // "2001:db8::1/128"
 * ipKey("2001:db8::1%eth0", 56);           // null
 */
export function ipKey(value: string, ipv6Prefix: number): string | null {
  const family = parseAddress(value, groups);
  if (family === 4) return value;
  if (family === 0) return null;
  if (isIpv4Mapped(groups)) return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  maskGroups(ipv6Prefix);
  return `${formatIpv6(groups)}/${ipv6Prefix}`;
}

/**
 * The dotted quad that runs from `start` to the end of `s` as a 32-bit number, or -1 when that
 * text is not exactly four decimal octets 0-255 without leading zeros.
 */
function ipv4At(s: string, start: number): number {
  const end = s.length;
  if (end - start > 15) return -1;
  let address = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      if (digits === 1 && octet === 0) return -1; // a leading zero
      octet = octet * 10 + (c - 0x30);
      if (octet > 255) return -1;
      digits++;
    } else if (c === 0x2e && digits > 0 && dots < 3) {
      address = address * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else {
      return -1;
    }
  }
  return dots === 3 && digits > 0 ? address * 256 + octet : -1;
}

/** The value of a hex digit's char code, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * Parses an RFC 4291 IPv6 text into `groups`; false when `s` is not one. `::` stands for
 * one or more zero groups, at most once; a dotted quad may only be the last 32 bits.
 */
function parseIpv6(s: string, groups: Uint16Array): boolean {
  const end = s.length;
  if (end < 2 || end > MAX_IPV6_TEXT) return false;
  let i = 0;
  let count = 0;
  /** how many groups came before the `::`, or -1 without one */
  let compressAt = -1;
  if (s.charCodeAt(0) === 0x3a) {
    if (s.charCodeAt(1) !== 0x3a) return false;
    compressAt = 0;
    i = 2;
  }
  while (i < end) {
    if (count === 8) return false;
    const start = i;
    let value = 0;
    let digit: number;
    while (i < end && i - start < 4 && (digit = hexValue(s.charCodeAt(i))) >= 0) {
      value = value * 16 + digit;
      i++;
    }
    if (i === start) return false; // an empty group: `:::` or a stray character
    if (i < end && s.charCodeAt(i) === 0x2e) {
      if (count > 6) return false;
      const v4 = ipv4At(s, start);
      if (v4 < 0) return false;
      groups[count++] = Math.floor(v4 / 0x10000);
      groups[count++] = v4 % 0x10000;
      break;
    }
    groups[count++] = value;
    if (i === end) break;
    if (s.charCodeAt(i) !== 0x3a) return false; // a fifth hex digit, or anything else
    i++;
    if (i < end && s.charCodeAt(i) === 0x3a) {
      if (compressAt >= 0) return false;
      compressAt = count;
      i++;
    } else if (i === end) {
      return false; // a lone trailing colon
    }
  }
  if (compressAt < 0) return count === 8;
  if (count > 7) return false; // `::` must stand for at least one group
  const zeros = 8 - count;
  for (let j = count - 1; j >= compressAt; j--) groups[j + zeros] = groups[j]!;
  groups.fill(0, compressAt, compressAt + zeros);
  return true;
}

/** Zeroes every bit of {@link groups} after the first `prefix`. */
function maskGroups(prefix: number): void {
  for (let j = 0; j < 8; j++) {
    const kept = prefix - 16 * j;
    if (kept >= 16) continue;
    groups[j] = kept <= 0 ? 0 : groups[j]! & (0xffff << (16 - kept));
  }
}

/**
 * 8 groups in RFC 5952 form: lower-case hex, the first longest run of 2+ zero groups as `::`
 * (an IPv4-mapped address too: `::ffff:c000:207`).
 *
 * @example
 * formatIpv6(Uint16Array.of(0x2001, 0xdb8, 0, 0, 1, 0, 0, 1)); // "2001:db8::1:0:0:1"
 */
export function formatIpv6(groups: Uint16Array): string {
  let runStart = -1;
  let runLength = 1;
  for (let j = 0; j < 8; ) {
    if (groups[j] !== 0) {
      j++;
      continue;
    }
    const start = j;
    while (j < 8 && groups[j] === 0) j++;
    if (j - start > runLength) {
      runStart = start;
      runLength = j - start;
    }
  }
  let text = "";
  for (let j = 0; j < 8; j++) {
    if (j === runStart) {
      text += "::";
      j += runLength - 1;
      continue;
    }
    text += (text === "" || text.endsWith(":") ? "" : ":") + groups[j]!.toString(16);
  }
  return text;
}
