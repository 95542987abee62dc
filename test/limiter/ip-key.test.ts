// The exported ipKey: a client address keyed for code that builds its own keys, as the proxy's `ip` key part keys it.
import { describe, expect, it } from "vitest";
import { buildKey } from "../../src/routing/key";
import { ipKey } from "../../src/lib";

describe("ipKey (exported)", () => {
  it("keys an IPv6 client by its /56 unless told another prefix", () => {
    expect(ipKey("2001:db8:abcd:12ff::1")).toBe("2001:db8:abcd:1200::/56");
    expect(ipKey("2001:db8:abcd:12ff::1", 64)).toBe("2001:db8:abcd:12ff::/64");
  });

  it("gives the key the proxy's ip key part gives the same address", () => {
    const rule = { key: [{ source: "ip" as const }], ipv6Prefix: 48 };
    for (const address of ["203.0.113.7", "::ffff:203.0.113.7", "2001:DB8:abcd:12ff::1", "2001:db8::"]) {
      const request = new Request("http://floodgate.test/", { headers: { "CF-Connecting-IP": address } });
      expect(ipKey(address, 48)).toBe(buildKey(rule, request));
    }
  });

  it("reads an address without the spaces and tabs around it, which the runtime keeps at the end of a header from the wire, as the proxy does", () => {
    expect([ipKey("203.0.113.7 "), ipKey("\t2001:db8:abcd:12ff::1\t")]).toEqual(["203.0.113.7", "2001:db8:abcd:1200::/56"]);
  });

  it("answers undefined for what is not an address, so the middleware counts it under its shared key", () => {
    for (const value of [undefined, null, "", "unknown", "203.0.113.7:443", "fe80::1%eth0", "[2001:db8::1]"]) expect(ipKey(value)).toBeUndefined();
  });

  it("refuses a prefix outside 32 to 128, naming it", () => {
    for (const prefix of [0, 31, 129, 56.5, Number.NaN]) expect(() => ipKey("2001:db8::1", prefix)).toThrow(/^ipKey: ipv6Prefix: expected a prefix length from 32 to 128/);
  });
});
