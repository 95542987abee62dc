// IP lists (match.ips, ALLOW_IPS, DENY_IPS): matching, the two written forms, errors, and a BigInt reference.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors";
import { parseIpList, type IpListSource } from "../../src/routing/cidr";
import { ipKey } from "../../src/routing/ip";

const DENY: IpListSource = { field: "DENY_IPS" };
const API: IpListSource = { field: "match.ips", rule: { index: 0, name: "api" } };
const list = (entries: readonly string[] | string) => parseIpList(entries, DENY);

/** The message parseIpList throws for `entries`, failing the test when it throws nothing. */
function errorOf(entries: readonly string[] | string, source: IpListSource = DENY): string {
  try {
    parseIpList(entries, source);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).message;
  }
  throw new Error(`parseIpList(${JSON.stringify(entries)}) did not throw`);
}

describe("IpList.has: IPv4", () => {
  it("matches an address listed alone, and no neighbour", () => {
    const ips = list(["203.0.113.7"]);
    expect(ips.has("203.0.113.7")).toBe(true);
    expect(ips.has("203.0.113.6")).toBe(false);
    expect(ips.has("203.0.113.8")).toBe(false);
  });

  it("matches a CIDR's first and last addresses, and nothing either side", () => {
    const ips = list(["203.0.113.0/24"]);
    expect([ips.has("203.0.112.255"), ips.has("203.0.113.0"), ips.has("203.0.113.255"), ips.has("203.0.114.0")]).toEqual([false, true, true, false]);
  });

  it("matches every IPv4 address with 0.0.0.0/0, and no IPv6 address", () => {
    const ips = list(["0.0.0.0/0"]);
    expect([ips.has("0.0.0.0"), ips.has("255.255.255.255"), ips.has("2001:db8::1"), ips.has("::")]).toEqual([true, true, false, false]);
  });

  it("matches the IPv4-mapped form of a listed IPv4 address", () => {
    const ips = list(["192.0.2.0/24"]);
    expect(ips.has("::ffff:192.0.2.7")).toBe(true);
    expect(ips.has("::FFFF:c000:0207")).toBe(true);
    expect(ips.has("::ffff:192.0.3.7")).toBe(false);
  });
});

describe("IpList.has: IPv6", () => {
  it("matches a CIDR's first and last addresses, and nothing either side", () => {
    const ips = list(["2001:db8::/32"]);
    expect(ips.has("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")).toBe(false);
    expect(ips.has("2001:db8::")).toBe(true);
    expect(ips.has("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")).toBe(true);
    expect(ips.has("2001:db9::")).toBe(false);
  });

  it("matches a client address in any text form", () => {
    const ips = list(["2001:db8:abcd:12::/64"]);
    for (const form of ["2001:db8:abcd:12::1", "2001:DB8:ABCD:12:0:0:0:1", "2001:0db8:abcd:0012:0000:0000:0000:0001", "2001:db8:abcd:12::0.0.0.1"]) {
      expect(ips.has(form)).toBe(true);
    }
  });

  it("matches an entry written in any text form", () => {
    for (const entry of ["2001:DB8::/32", "2001:0db8:0000::/32", "2001:db8:0:0:0:0:0:0/32"]) {
      expect(list([entry]).has("2001:db8:1::1")).toBe(true);
    }
  });

  it("matches every IPv6 address with ::/0, but no IPv4 address, IPv4-mapped or not", () => {
    const ips = list(["::/0"]);
    expect([ips.has("::"), ips.has("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), ips.has("192.0.2.7"), ips.has("::ffff:192.0.2.7")]).toEqual([true, true, false, false]);
  });

  it("reads an IPv4-mapped entry with a prefix of 96 or more as its IPv4 equivalent", () => {
    for (const entry of ["::ffff:192.0.2.0/120", "::ffff:c000:200/120", "0:0:0:0:0:FFFF:192.0.2.0/120"]) {
      const ips = list([entry]);
      expect([ips.has("192.0.2.0"), ips.has("192.0.2.255"), ips.has("::ffff:192.0.2.9"), ips.has("192.0.3.0")]).toEqual([true, true, true, false]);
    }
  });

  it("reads ::ffff:0:0/96 as every IPv4 address", () => {
    const ips = list(["::ffff:0:0/96"]);
    expect([ips.has("0.0.0.0"), ips.has("255.255.255.255"), ips.has("::ffff:10.0.0.1"), ips.has("::1")]).toEqual([true, true, true, false]);
  });

  it("reads an IPv4-mapped address alone as its IPv4 /32", () => {
    const ips = list(["::ffff:192.0.2.7"]);
    expect([ips.has("192.0.2.7"), ips.has("192.0.2.8")]).toEqual([true, false]);
  });

  it("keeps an IPv4-compatible (deprecated) entry IPv6, not IPv4", () => {
    const ips = list(["::192.0.2.7"]);
    expect([ips.has("::c000:207"), ips.has("192.0.2.7")]).toEqual([true, false]);
  });
});

describe("IpList.has: several entries", () => {
  it("still matches a larger range around a later, nested one, in either order", () => {
    for (const entries of [["10.0.0.0/8", "10.1.0.0/16"], ["10.1.0.0/16", "10.0.0.0/8"]]) {
      const ips = list(entries);
      expect([ips.has("10.0.0.1"), ips.has("10.1.2.3"), ips.has("10.200.0.1"), ips.has("11.0.0.0")]).toEqual([true, true, true, false]);
    }
  });

  it("matches across overlapping, adjacent and repeated ranges, and nothing either side", () => {
    const ips = list(["10.0.0.128/25", "10.0.0.0/25", "10.0.0.64/26", "10.0.0.0/25", "10.0.1.0"]);
    for (const address of ["10.0.0.0", "10.0.0.127", "10.0.0.128", "10.0.0.255", "10.0.1.0"]) expect(ips.has(address)).toBe(true);
    for (const address of ["9.255.255.255", "10.0.1.1"]) expect(ips.has(address)).toBe(false);
  });

  it("keeps IPv4 and IPv6 entries apart in one list", () => {
    const ips = list(["0.0.0.0/1", "8000::/1"]);
    expect([ips.has("1.2.3.4"), ips.has("200.0.0.1"), ips.has("9000::1"), ips.has("::1")]).toEqual([true, false, true, false]);
  });
});

describe("IpList.overlaps", () => {
  it("finds a network holding a listed address, or inside a listed range, and none apart from them", () => {
    const ips = list(["2001:db8:abcd:12ff::1", "203.0.113.0/24", "2001:db9::/32"]);
    expect(ips.overlaps("2001:db8:abcd:1200::/56")).toBe(true);
    expect(ips.overlaps("2001:db8:abcd:1300::/56")).toBe(false);
    expect(ips.overlaps("2001:db9:1:100::/56")).toBe(true);
    expect(ips.overlaps("203.0.113.9")).toBe(true);
    expect(ips.overlaps("203.0.114.9")).toBe(false);
  });

  it("reads an address as its own network, an IPv4-mapped one as IPv4, and anything else as no network", () => {
    const ips = list(["203.0.113.0/24"]);
    expect(ips.overlaps("::ffff:203.0.113.9/128")).toBe(true);
    expect([ips.overlaps("not-an-address"), ips.overlaps("203.0.113.0/99"), ips.overlaps("")]).toEqual([false, false, false]);
  });
});

describe("IpList.has: not an address", () => {
  const everything = list(["0.0.0.0/0", "::/0"]);

  it.each([
    ["null", null],
    ["undefined", undefined],
    ["empty", ""],
    ["a name", "localhost"],
    ["a CIDR", "10.0.0.0/8"],
    ["an address with surrounding spaces", " 10.0.0.1 "],
    ["IPv6 in brackets", "[2001:db8::1]"],
    ["IPv6 with a zone id", "fe80::1%eth0"],
    ["IPv4 with a port", "10.0.0.1:443"],
    ["shorthand IPv4", "127.1"],
    ["a long run of colons", ":".repeat(100_000)],
  ])("is in no list: %s", (_, value) => {
    expect(everything.has(value)).toBe(false);
  });
});

describe("parseIpList: written forms", () => {
  it("reads a comma-separated string, ignoring spaces and tabs around entries", () => {
    const ips = list(" 203.0.113.0/24 ,2001:db8::/32,\t192.0.2.7 ");
    expect([ips.has("203.0.113.9"), ips.has("2001:db8::9"), ips.has("192.0.2.7"), ips.has("192.0.2.8")]).toEqual([true, true, true, false]);
  });

  it("reads a string of one entry", () => {
    expect(list("192.0.2.7").has("192.0.2.7")).toBe(true);
  });

  it("ignores spaces around array entries too", () => {
    expect(list([" 192.0.2.7 "]).has("192.0.2.7")).toBe(true);
  });

  it("keeps the entries as written, trimmed, and serializes as them", () => {
    const ips = list(" 203.0.113.0/24, ::FFFF:192.0.2.7");
    expect(ips.entries).toEqual(["203.0.113.0/24", "::FFFF:192.0.2.7"]);
    expect(JSON.stringify({ ips })).toBe('{"ips":["203.0.113.0/24","::FFFF:192.0.2.7"]}');
  });
});

describe("parseIpList: errors", () => {
  const FORM = `an IP address or CIDR like "203.0.113.7", "203.0.113.0/24" or "2001:db8::/32"`;

  it("names a rule's field and the entry's index, as a ConfigError", () => {
    let error: unknown;
    try {
      parseIpList(["10.0.0.0/8", "192.0.2.0/24", "10.0.0.1/8"], API);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe("rules[0].match.ips[2]");
    expect((error as ConfigError).rule).toBe("api");
    expect((error as ConfigError).message).toBe(
      `rules[0] ("api").match.ips[2]: "10.0.0.1/8" has bits set after its /8 prefix; write "10.0.0.0/8" for the network, or "10.0.0.1" alone for the one address`,
    );
  });

  it("names a var and quotes the entry for a comma-separated string", () => {
    expect(errorOf("192.0.2.0/24, 10.0.0.1/8")).toBe(
      `DENY_IPS: "10.0.0.1/8" has bits set after its /8 prefix; write "10.0.0.0/8" for the network, or "10.0.0.1" alone for the one address`,
    );
  });

  it("rejects an IPv6 CIDR with bits set after its prefix, suggesting the network in RFC 5952 form", () => {
    expect(errorOf(["2001:DB8::1/32"])).toBe(
      `DENY_IPS[0]: "2001:DB8::1/32" has bits set after its /32 prefix; write "2001:db8::/32" for the network, or "2001:DB8::1" alone for the one address`,
    );
  });

  it("rejects an IPv4-mapped CIDR with bits set after its prefix, suggesting the network IPv4-mapped", () => {
    expect(errorOf("::ffff:192.0.2.1/120")).toContain(`write "::ffff:192.0.2.0/120" for the network`);
  });

  it("rejects bits set under a /0 prefix", () => {
    expect(errorOf("1.2.3.4/0")).toContain(`write "0.0.0.0/0" for the network`);
    expect(errorOf("::1/0")).toContain(`write "::/0" for the network`);
  });

  it("rejects an empty array, saying how to match every address instead", () => {
    expect(errorOf([], API)).toBe(`rules[0] ("api").match.ips: expected at least one entry, ${FORM} (leave it out to match every address), got an empty array`);
  });

  it.each(["", "   "])("rejects the empty string %j as a var", (value) => {
    expect(errorOf(value)).toBe(`DENY_IPS: expected at least one entry, ${FORM} (leave it unset for none), got ${JSON.stringify(value)}`);
  });

  it.each([
    ["1.2.3.4,,5.6.7.8", 2, 3],
    ["1.2.3.4, ", 2, 2],
    [",1.2.3.4", 1, 2],
  ])("rejects an empty entry in %j", (value, entry, of) => {
    expect(errorOf(value)).toBe(`DENY_IPS: entry ${entry} of ${of} is empty; separate entries with single commas, like "203.0.113.0/24, 2001:db8::/32"`);
  });

  it("rejects an empty string in an array", () => {
    expect(errorOf(["1.2.3.4", " "], API)).toBe(`rules[0] ("api").match.ips[1]: expected ${FORM}, got ""`);
  });

  it("rejects an array entry that is not a string", () => {
    expect(errorOf(["1.2.3.4", 5 as unknown as string], API)).toBe(`rules[0] ("api").match.ips[1]: expected ${FORM}, got 5`);
  });

  it("rejects a list that is neither an array nor a string", () => {
    expect(errorOf({} as unknown as string[], API)).toBe(
      `rules[0] ("api").match.ips: expected an array of IP addresses and CIDRs like ["203.0.113.0/24", "2001:db8::/32"] (leave it out to match every address), got an object`,
    );
  });

  it("asks a var for the comma-separated form PRODUCT.md gives, when it is neither a string nor an array", () => {
    expect(errorOf(5 as unknown as string)).toBe(
      `DENY_IPS: expected a comma-separated list of IP addresses and CIDRs like "203.0.113.0/24, 2001:db8::/32" (or an array of them) (leave it unset for none), got 5`,
    );
  });

  it.each(["10.0.0.300", "01.2.3.4", "10.0.0", "2001:db8:::/32", "[2001:db8::]/32", "fe80::1%eth0", "example.com", "10.0.0.0 /8", "/8"])(
    "rejects %j, whose address is malformed",
    (entry) => {
      expect(errorOf([entry])).toBe(`DENY_IPS[0]: expected ${FORM}, got ${JSON.stringify(entry)}`);
    },
  );

  it.each(["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/ 8", "10.0.0.0/8 8", "10.0.0.0/24/24", "10.0.0.0/1000"])(
    "rejects %j, whose IPv4 prefix length is malformed or above 32",
    (entry) => {
      expect(errorOf([entry])).toBe(`DENY_IPS[0]: ${JSON.stringify(entry)} has a bad prefix length: after "/" write a whole number from 0 to 32 for IPv4, like "203.0.113.0/24"`);
    },
  );

  it.each(["2001:db8::/129", "::ffff:192.0.2.0/129", "2001:db8::/0x20"])("rejects %j, whose IPv6 prefix length is malformed or above 128", (entry) => {
    expect(errorOf([entry])).toBe(`DENY_IPS[0]: ${JSON.stringify(entry)} has a bad prefix length: after "/" write a whole number from 0 to 128 for IPv6, like "2001:db8::/32"`);
  });

  it("accepts the extreme prefix lengths of each family", () => {
    for (const entry of ["0.0.0.0/0", "192.0.2.7/32", "::/0", "2001:db8::1/128", "::ffff:0.0.0.0/96", "::ffff:192.0.2.7/128"]) {
      expect(() => list([entry])).not.toThrow();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Against an independent reference: each CIDR as a BigInt network and prefix, membership by
// shifting, no merging; IPv4-mapped addresses (and mapped CIDRs of /96 or more) read as IPv4.

type Family = 4 | 6;
interface Cidr {
  readonly family: Family;
  readonly network: bigint;
  readonly prefix: number;
}
interface Address {
  readonly family: Family;
  readonly value: bigint;
}

const width = (family: Family) => (family === 4 ? 32 : 128);
const MAPPED = 0xffffn << 32n;
const isMapped = (value: bigint) => value >> 32n === 0xffffn;

function referenceHas(cidrs: readonly Cidr[], address: Address): boolean {
  const a = address.family === 6 && isMapped(address.value) ? { family: 4, value: address.value & 0xffffffffn } : address;
  return cidrs.some((cidr) => {
    const c = cidr.family === 6 && cidr.prefix >= 96 && isMapped(cidr.network) ? { family: 4, network: cidr.network & 0xffffffffn, prefix: cidr.prefix - 96 } : cidr;
    const shift = BigInt(width(c.family as Family) - c.prefix);
    return c.family === a.family && c.network >> shift === a.value >> shift;
  });
}

const hostMask = (family: Family, prefix: number) => (1n << BigInt(width(family) - prefix)) - 1n;

const dottedText = (v: bigint) => [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 0xffn)).join(".");
const groupsOf = (v: bigint) => Array.from({ length: 8 }, (_, i) => Number((v >> BigInt(16 * (7 - i))) & 0xffffn));
/** Full form, or the WHATWG URL parser's compressed form, or mapped with a dotted tail: never our own formatter. */
function ipv6Text(v: bigint, style: number): string {
  const full = groupsOf(v).map((g) => g.toString(16)).join(":");
  if (style % 3 === 0) return full.toUpperCase();
  if (style % 3 === 2 && isMapped(v)) return `::ffff:${dottedText(v & 0xffffffffn)}`;
  return new URL(`http://[${full}]`).hostname.slice(1, -1);
}
function addressText(a: Address, style: number): string {
  return a.family === 4 ? dottedText(a.value) : ipv6Text(a.value, style);
}
function cidrText(c: Cidr, style: number): string {
  const address = c.family === 4 ? dottedText(c.network) : ipv6Text(c.network, style);
  return c.prefix === width(c.family) && style % 2 === 0 ? address : `${address}/${c.prefix}`;
}

const u32 = fc.bigInt({ min: 0n, max: 0xffffffffn });
// Zero groups are common in IPv6, and 0xffff makes IPv4-mapped values come up.
const group = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0n) },
  { weight: 4, arbitrary: fc.bigInt({ min: 0n, max: 0xffffn }) },
  { weight: 1, arbitrary: fc.constant(0xffffn) },
);
const u128 = fc.oneof(
  { weight: 4, arbitrary: fc.array(group, { minLength: 8, maxLength: 8 }).map((gs) => gs.reduce((n, g) => (n << 16n) | g, 0n)) },
  { weight: 1, arbitrary: u32.map((v) => MAPPED | v) },
);
const v4Prefix = fc.oneof(fc.integer({ min: 0, max: 32 }), fc.constantFrom(0, 1, 31, 32));
const v6Prefix = fc.oneof(fc.integer({ min: 0, max: 128 }), fc.constantFrom(0, 1, 64, 95, 96, 97, 127, 128));

const toCidr = (family: Family, value: bigint, prefix: number): Cidr => ({ family, prefix, network: value & ~hostMask(family, prefix) });
const anyCidr = fc.oneof(
  fc.tuple(u32, v4Prefix).map(([v, p]) => toCidr(4, v, p)),
  fc.tuple(u128, v6Prefix).map(([v, p]) => toCidr(6, v, p)),
  // IPv4-mapped CIDRs, /96 and up
  fc.tuple(u32, fc.integer({ min: 96, max: 128 })).map(([v, p]) => toCidr(6, MAPPED | v, p)),
);
// Many CIDRs in one small space, so that they nest, overlap and touch.
const clusteredCidr = fc.oneof(
  fc.tuple(fc.bigInt({ min: 0n, max: 0xffffn }), fc.integer({ min: 16, max: 32 })).map(([v, p]) => toCidr(4, 0x0a000000n | v, p)),
  fc.tuple(fc.bigInt({ min: 0n, max: 0xffffn }), fc.integer({ min: 112, max: 128 })).map(([v, p]) => toCidr(6, 0x20010db8n << 96n | v, p)),
);
const cidrs = fc.oneof(fc.array(anyCidr, { minLength: 1, maxLength: 8 }), fc.array(clusteredCidr, { minLength: 1, maxLength: 40 }));

/** Addresses worth asking about a list: inside a CIDR, just either side of one, or anywhere. */
function probes(list: readonly Cidr[]): fc.Arbitrary<Address[]> {
  const near = fc.tuple(fc.nat(list.length - 1), fc.constantFrom("inside", "before", "after"), u128).map(([i, where, noise]): Address => {
    const c = list[i]!;
    const mask = hostMask(c.family, c.prefix);
    const max = (1n << BigInt(width(c.family))) - 1n;
    const value = where === "inside" ? c.network | (noise & mask) : where === "before" ? c.network - 1n : (c.network | mask) + 1n;
    return { family: c.family, value: value < 0n ? max : value > max ? 0n : value };
  });
  const anywhere = fc.oneof(u32.map((value): Address => ({ family: 4, value })), u128.map((value): Address => ({ family: 6, value })));
  return fc.array(fc.oneof({ weight: 3, arbitrary: near }, { weight: 1, arbitrary: anywhere }), { minLength: 1, maxLength: 12 });
}

/** How a list is written: an array, or a string with random space around its commas. */
const written = fc.record({ asString: fc.boolean(), styles: fc.array(fc.nat(), { minLength: 40, maxLength: 40 }), pads: fc.array(fc.constantFrom("", " ", "  ", "\t"), { minLength: 80, maxLength: 80 }) });

describe("IpList.has against a BigInt reference", () => {
  it("answers, for any list and address, whether some CIDR in it contains the address", () => {
    let inside = 0;
    let probed = 0;
    fc.assert(
      fc.property(
        cidrs.chain((list) => fc.tuple(fc.constant(list), probes(list), written, fc.array(fc.nat(), { minLength: 12, maxLength: 12 }))),
        ([list, addresses, form, addressStyles]) => {
          const texts = list.map((c, i) => cidrText(c, form.styles[i]!));
          const ips = form.asString ? parseIpList(texts.map((t, i) => form.pads[2 * i] + t + form.pads[2 * i + 1]).join(","), DENY) : parseIpList(texts, API);
          addresses.forEach((address, i) => {
            const expected = referenceHas(list, address);
            probed++;
            if (expected) inside++;
            expect(ips.has(addressText(address, addressStyles[i]!)), `${addressText(address, 1)} in ${texts.join(", ")}`).toBe(expected);
          });
        },
      ),
      { numRuns: 2_000 },
    );
    // Both answers come up often enough to mean something.
    expect(inside / probed).toBeGreaterThan(0.2);
    expect(inside / probed).toBeLessThan(0.8);
  });

  it("answers an IPv4 address and its IPv4-mapped form alike", () => {
    fc.assert(
      fc.property(fc.array(anyCidr, { minLength: 1, maxLength: 8 }), u32, (list, v) => {
        const ips = parseIpList(list.map((c, i) => cidrText(c, i)), DENY);
        expect(ips.has(`::ffff:${dottedText(v)}`)).toBe(ips.has(dottedText(v)));
        expect(ips.has(dottedText(v))).toBe(referenceHas(list, { family: 4, value: v }));
      }),
      { numRuns: 1_000 },
    );
  });

  it("rejects a CIDR with host bits set, naming it and the network to write instead", () => {
    const withHostBits = fc
      .oneof(fc.tuple(fc.constant<Family>(4), u32, v4Prefix), fc.tuple(fc.constant<Family>(6), u128, v6Prefix))
      .filter(([family, v, p]) => (v & hostMask(family, p)) !== 0n);
    fc.assert(
      fc.property(withHostBits, fc.nat(), ([family, v, p], style) => {
        const address = addressText({ family, value: v }, style);
        const cidr = toCidr(family, v, p);
        const network =
          family === 4 ? dottedText(cidr.network) : p >= 96 && isMapped(cidr.network) ? `::ffff:${dottedText(cidr.network & 0xffffffffn)}` : ipv6Text(cidr.network, 1);
        expect(errorOf([`${address}/${p}`], API)).toBe(
          `rules[0] ("api").match.ips[0]: "${address}/${p}" has bits set after its /${p} prefix; write "${network}/${p}" for the network, or "${address}" alone for the one address`,
        );
        // What it suggests is the CIDR the reference reads.
        expect(parseIpList([`${network}/${p}`], API).has(address)).toBe(referenceHas([cidr], { family, value: v }));
      }),
      { numRuns: 1_000 },
    );
  });

  it("holds every address ipKey reads in 0.0.0.0/0 and ::/0, and nothing else", () => {
    const everything = parseIpList("0.0.0.0/0, ::/0", DENY);
    const unit = fc.constantFrom(..."0123456789abcdefABCDEF:.:.%/ ");
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit, maxLength: 45 }), fc.string({ unit: "binary", maxLength: 50 })), (text) => {
        expect(everything.has(text)).toBe(ipKey(text, 128) !== null);
      }),
      { numRuns: 2_000 },
    );
  });
});
