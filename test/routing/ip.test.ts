// Client addresses as `ip` key values, checked against the WHATWG URL parser and BigInt masking.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ipKey } from "../../src/routing/ip";

describe("ipKey: IPv4", () => {
  it("keeps a dotted quad as is", () => {
    expect(ipKey("203.0.113.9", 56)).toBe("203.0.113.9");
  });

  it("accepts the extremes of each octet", () => {
    expect(ipKey("0.0.0.0", 56)).toBe("0.0.0.0");
    expect(ipKey("255.255.255.255", 56)).toBe("255.255.255.255");
  });

  it.each(["01.2.3.4", "1.2.3.04", "1.2.3.00", "00.0.0.0"])("rejects %j, which has a leading zero", (value) => {
    expect(ipKey(value, 56)).toBeNull();
  });

  it.each(["256.1.1.1", "1.2.3.999", "1.2.3.1000"])("rejects %j, which has an octet above 255", (value) => {
    expect(ipKey(value, 56)).toBeNull();
  });

  it.each(["1.2.3", "1.2.3.4.5", "1..3.4", ".1.2.3", "1.2.3.4.", "127.1", "0x7f.0.0.1", "1.2.3.4a"])(
    "rejects %j, which is not four decimal octets",
    (value) => {
      expect(ipKey(value, 56)).toBeNull();
    },
  );
});

describe("ipKey: IPv6", () => {
  it("keys an address by its /56 network in RFC 5952 form", () => {
    expect(ipKey("2001:db8:abcd:12ff::1", 56)).toBe("2001:db8:abcd:1200::/56");
  });

  it("reads the full form, with leading zeros", () => {
    expect(ipKey("2001:0db8:abcd:12ff:0000:0000:0000:0001", 56)).toBe("2001:db8:abcd:1200::/56");
  });

  it("reads upper and mixed case, and writes lower case", () => {
    expect(ipKey("2001:DB8:AbCd:12Ff::1", 128)).toBe("2001:db8:abcd:12ff::1/128");
  });

  it("writes /128 with its prefix too, so every IPv6 key has one shape", () => {
    expect(ipKey("2001:db8::1", 128)).toBe("2001:db8::1/128");
  });

  it("masks prefixes that are not a multiple of 16", () => {
    expect(ipKey("2001:db8:abcd:12ff::", 57)).toBe("2001:db8:abcd:1280::/57");
    expect(ipKey("2001:db8:abcd:12ff::", 63)).toBe("2001:db8:abcd:12fe::/63");
    expect(ipKey("2001:db8:abcd:12ff::", 32)).toBe("2001:db8::/32");
  });

  it("compresses the longest run of zero groups", () => {
    expect(ipKey("2001:0:0:1:0:0:0:1", 128)).toBe("2001:0:0:1::1/128");
  });

  it("compresses the first of two equally long runs", () => {
    expect(ipKey("2001:db8:0:0:1:0:0:1", 128)).toBe("2001:db8::1:0:0:1/128");
  });

  it("never compresses a single zero group", () => {
    expect(ipKey("2001:db8:0:1:1:1:1:1", 128)).toBe("2001:db8:0:1:1:1:1:1/128");
  });

  it("reads :: standing for one group", () => {
    expect(ipKey("1:2:3:4:5:6:7::", 128)).toBe("1:2:3:4:5:6:7:0/128");
  });

  it("keys the unspecified and loopback addresses like any other", () => {
    expect(ipKey("::", 56)).toBe("::/56");
    expect(ipKey("::1", 128)).toBe("::1/128");
  });

  it("reads a dotted quad in the last 32 bits", () => {
    expect(ipKey("64:ff9b::1.2.3.4", 128)).toBe("64:ff9b::102:304/128");
    expect(ipKey("64:ff9b::1.2.3.4", 56)).toBe("64:ff9b::/56");
  });

  it("keys an IPv4-mapped address as its IPv4 address, whatever its form and the prefix", () => {
    for (const form of ["::ffff:192.0.2.7", "::FFFF:192.0.2.7", "::ffff:c000:0207", "0:0:0:0:0:ffff:c000:207", "0000:0000:0000:0000:0000:FFFF:192.0.2.7"]) {
      expect(ipKey(form, 56)).toBe("192.0.2.7");
      expect(ipKey(form, 128)).toBe("192.0.2.7");
    }
  });

  it("keys an IPv4-compatible (deprecated) address as IPv6, not as IPv4", () => {
    expect(ipKey("::192.0.2.7", 128)).toBe("::c000:207/128");
  });

  it.each([
    ":::", "1:::2", "1::2::3", ":1::", "1:", ":1", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::",
    "::1:2:3:4:5:6:7:8", "1:2:3:4:5:6::7:8:9", "12345::", "g::", "::-1",
  ])("rejects %j, which is not RFC 4291 text", (value) => {
    expect(ipKey(value, 56)).toBeNull();
  });

  it.each(["1:2:3:4:5:6:7:1.2.3.4", "1:2:3:4:5:6::1.2.3.4", "::1.2.3", "::01.2.3.4", "::ffff:1.2.3.256", "::1.2.3.4:5", "::1.2.3.4.5"])(
    "rejects %j, whose dotted quad is malformed or misplaced",
    (value) => {
      expect(ipKey(value, 56)).toBeNull();
    },
  );
});

describe("ipKey: not an address", () => {
  it.each([
    ["empty", ""],
    ["a hostname", "localhost"],
    ["a domain of hex digits", "cafe.be"],
    ["text", "not an address"],
    ["IPv4 with a port", "192.0.2.1:443"],
    ["IPv6 in brackets", "[2001:db8::1]"],
    ["IPv6 in brackets with a port", "[2001:db8::1]:443"],
    ["IPv6 with a zone id", "fe80::1%eth0"],
    ["IPv4 with surrounding spaces", " 192.0.2.1 "],
    ["IPv6 with a trailing space", "2001:db8::1 "],
    ["a CIDR", "2001:db8::/56"],
    ["the missing-part marker", "#none"],
    ["a long run of digits", "1".repeat(100_000)],
    ["a long run of colons", ":".repeat(100_000)],
  ])("rejects %s", (_, value) => {
    expect(ipKey(value, 56)).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------
// Against an independent reference: the WHATWG URL parser reads and writes IPv6 (its serializer
// compresses exactly as RFC 5952 does), BigInt masks.

const toBigInt = (groups: readonly number[]) => groups.reduce((n, g) => (n << 16n) | BigInt(g), 0n);
const toGroups = (n: bigint) => Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(16 * (7 - i))) & 0xffffn));

/** The URL parser's canonical text for `[text]`, without brackets; null when it is not IPv6. */
function urlIpv6(text: string): string | null {
  try {
    const host = new URL(`http://[${text}]`).hostname;
    return host.slice(1, -1);
  } catch {
    return null;
  }
}

/** True when the URL parser reads `text` as exactly this IPv4 address (no shorthand, octal or hex). */
function urlIpv4(text: string): boolean {
  if (!/^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/.test(text)) return false;
  try {
    return new URL(`http://${text}`).hostname === text;
  } catch {
    return false;
  }
}

/** The groups of a canonical IPv6 text as the URL parser writes it (hex groups, at most one `::`). */
function groupsOfCanonical(text: string): number[] {
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const left = head === "" ? [] : head!.split(":");
  if (tail === undefined) return left.map((g) => parseInt(g, 16));
  const right = tail === "" ? [] : tail.split(":");
  return [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right].map((g) => parseInt(g, 16));
}

function referenceKey(groups: readonly number[], prefix: number): string {
  const n = toBigInt(groups);
  if (n >> 32n === 0xffffn) return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join(".");
  const mask = ((1n << BigInt(prefix)) - 1n) << BigInt(128 - prefix);
  const masked = toGroups(n & mask).map((g) => g.toString(16)).join(":");
  return `${urlIpv6(masked)}/${prefix}`;
}

const isMapped = (groups: readonly number[]) => toBigInt(groups) >> 32n === 0xffffn;

// Zeros are common, so that runs to compress (and ties between them) come up often.
const group = fc.oneof(
  { weight: 4, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 0xf }) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
  { weight: 1, arbitrary: fc.constant(0xffff) },
);
const octet = fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 9, 10, 99, 100, 255));
const mappedGroups = fc.tuple(octet, octet, octet, octet).map(([a, b, c, d]) => [0, 0, 0, 0, 0, 0xffff, (a << 8) | b, (c << 8) | d]);
const groups8 = fc.oneof({ weight: 9, arbitrary: fc.array(group, { minLength: 8, maxLength: 8 }) }, { weight: 1, arbitrary: mappedGroups });
const prefix = fc.oneof(fc.integer({ min: 32, max: 128 }), fc.constantFrom(32, 48, 56, 57, 63, 64, 65, 127, 128));

/** How one address is written: which zero run (if any) becomes `::`, a dotted tail, padding, case. */
const textForm = fc.record({
  compress: fc.boolean(),
  run: fc.nat(),
  dottedTail: fc.boolean(),
  padding: fc.array(fc.nat({ max: 3 }), { minLength: 8, maxLength: 8 }),
  upper: fc.array(fc.boolean(), { minLength: 45, maxLength: 45 }),
});
type TextForm = typeof textForm extends fc.Arbitrary<infer T> ? T : never;

/** Writes `groups` in one RFC 4291 text form: full or compressed (any zero run), padded or not, any case. */
function render(groups: readonly number[], form: TextForm): string {
  const hexGroups = form.dottedTail ? 6 : 8;
  const cells = groups.slice(0, hexGroups).map((g, i) => {
    const hex = g.toString(16);
    return "0".repeat(Math.min(form.padding[i]!, 4 - hex.length)) + hex;
  });
  const dotted = `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  const runs: [number, number][] = [];
  for (let start = 0; start < hexGroups; start++) {
    for (let end = start; end < hexGroups && groups[end] === 0; end++) runs.push([start, end + 1]);
  }
  let text: string;
  if (form.compress && runs.length > 0) {
    const [start, end] = runs[form.run % runs.length]!;
    const tail = [...cells.slice(end), ...(form.dottedTail ? [dotted] : [])].join(":");
    text = `${cells.slice(0, start).join(":")}::${tail}`;
  } else {
    text = [...cells, ...(form.dottedTail ? [dotted] : [])].join(":");
  }
  return [...text].map((c, i) => (form.upper[i] ? c.toUpperCase() : c)).join("");
}

describe("ipKey against the URL parser and BigInt masking", () => {
  it("gives the reference key for every address in every text form and prefix", () => {
    fc.assert(
      fc.property(groups8, textForm, prefix, (groups, form, p) => {
        const text = render(groups, form);
        // The generator itself is checked: the URL parser reads the text as these groups.
        expect(groupsOfCanonical(urlIpv6(text)!)).toEqual(groups);
        expect(ipKey(text, p)).toBe(referenceKey(groups, p));
      }),
      { numRuns: 5_000 },
    );
  });

  it("gives one key to addresses in the same /p, and different keys across /p", () => {
    // b differs from a in exactly one bit: inside the prefix the keys must differ, after it they must not.
    fc.assert(
      fc.property(groups8, fc.integer({ min: 0, max: 127 }), prefix, (groups, bit, p) => {
        const other = toGroups(toBigInt(groups) ^ (1n << BigInt(127 - bit)));
        fc.pre(!isMapped(groups) && !isMapped(other));
        const a = ipKey(groups.map((g) => g.toString(16)).join(":"), p);
        const b = ipKey(other.map((g) => g.toString(16)).join(":"), p);
        expect(a === b).toBe(bit >= p);
      }),
      { numRuns: 5_000 },
    );
  });

  it("keys every IPv4-mapped address, in every text form, as its IPv4 address", () => {
    fc.assert(
      fc.property(fc.tuple(octet, octet, octet, octet), textForm, prefix, (octets, form, p) => {
        const [a, b, c, d] = octets;
        const text = render([0, 0, 0, 0, 0, 0xffff, (a << 8) | b, (c << 8) | d], form);
        expect(ipKey(text, p)).toBe(octets.join("."));
      }),
      { numRuns: 2_000 },
    );
  });

  it("keeps every dotted quad the URL parser writes back unchanged", () => {
    fc.assert(
      fc.property(fc.tuple(octet, octet, octet, octet), prefix, (octets, p) => {
        const text = octets.join(".");
        expect(urlIpv4(text)).toBe(true);
        expect(ipKey(text, p)).toBe(text);
      }),
    );
  });

  // Over [0-9a-fA-F:.%], ipKey accepts exactly what the URL parser reads as IPv6, plus dotted
  // quads the URL parser writes back unchanged. Deliberately rejected although the URL parser
  // reads them as IPv4: shorthand (`1.2.3` → 1.2.0.3), leading zeros or octal (`01.2.3.4`), a
  // trailing dot. Nothing the URL parser rejects is accepted. A zone id (`%…`) is rejected by both.
  const unit = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(..."0123456789abcdefABCDEF") },
    { weight: 3, arbitrary: fc.constant(":") },
    { weight: 2, arbitrary: fc.constant(".") },
    { weight: 1, arbitrary: fc.constant("%") },
  );
  const alphabet = new Set("0123456789abcdefABCDEF:.%");
  const edit = fc.record({ at: fc.nat(), op: fc.constantFrom("insert", "delete", "replace"), char: unit });
  // Random strings are rarely addresses: near-misses are one edit away from a valid text.
  const nearMiss = fc.tuple(groups8, textForm, edit).map(([groups, form, { at, op, char }]) => {
    const text = render(groups, form);
    const i = at % (text.length + 1);
    return op === "insert" ? text.slice(0, i) + char + text.slice(i) : text.slice(0, i) + (op === "replace" ? char : "") + text.slice(i + 1);
  });
  const dottedNearMiss = fc.tuple(octet, octet, octet, octet, edit).map(([a, b, c, d, { at, op, char }]) => {
    const text = `${a}.${b}.${c}.${d}`;
    const i = at % (text.length + 1);
    return op === "insert" ? text.slice(0, i) + char + text.slice(i) : text.slice(0, i) + (op === "replace" ? char : "") + text.slice(i + 1);
  });
  const candidate = fc.oneof(fc.string({ unit, maxLength: 48 }), nearMiss, dottedNearMiss);

  it("accepts a string over [0-9a-fA-F:.%] exactly when the URL parser reads it as IPv6 or a plain dotted quad", () => {
    let accepted = 0;
    fc.assert(
      fc.property(candidate, prefix, (text, p) => {
        expect([...text].every((c) => alphabet.has(c))).toBe(true);
        const canonical = urlIpv6(text);
        const key = ipKey(text, p);
        if (canonical !== null) {
          accepted++;
          expect(key).toBe(referenceKey(groupsOfCanonical(canonical), p));
        } else if (urlIpv4(text)) {
          accepted++;
          expect(key).toBe(text);
        } else {
          expect(key).toBeNull();
        }
      }),
      { numRuns: 20_000 },
    );
    // Both sides of the boundary come up often enough to mean something.
    expect(accepted).toBeGreaterThan(2_000);
    expect(accepted).toBeLessThan(18_000);
  });

  it("returns null or a well-formed key for any string, and never throws", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 60 }), prefix, (text, p) => {
        const key = ipKey(text, p);
        if (key !== null) expect(key).toMatch(new RegExp(`^(\\d{1,3}(\\.\\d{1,3}){3}|[0-9a-f:]{2,39}/${p})$`));
      }),
      { numRuns: 5_000 },
    );
  });
});
