// The `ip` key part through the real Worker: IPv6 clients limited by network, not by address.
import { describe, expect, it } from "vitest";
import { PATIENT_TIMEOUT } from "../helpers/rules";
import { send } from "../helpers/worker";

const TOKEN = "ip-keys-admin-token";
// Each test asserts its fresh rule's first answers (PATIENT_TIMEOUT): a loaded machine's first call once passed 1 s,
// and [200, 429, 429] came back [429, 200, 429].
const from = (ip: string, path = "/ip-keys/x") => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });
const statusesOf = async (ips: string[], rules: unknown[]) => {
  const statuses = [];
  for (const ip of ips) statuses.push((await send(from(ip), { rules, ADMIN_TOKEN: TOKEN })).status);
  return statuses;
};

describe("ip keys through the Worker", () => {
  it("gives two IPv6 addresses of one /56 one quota, and another /56 its own", async () => {
    const rules = [{ name: "v6-per-56", limit: 3, period: "1h", timeout: PATIENT_TIMEOUT }];
    const first = Array.from({ length: 3 }, () => "2001:db8:1:100::1");
    expect(await statusesOf(first, rules)).toEqual([200, 200, 200]);
    // The same /56 (2001:db8:1:100:: to 2001:db8:1:1ff:…), another /64 in it, written another way.
    expect(await statusesOf(["2001:DB8:1:1FF:FFFF:0:0:2"], rules)).toEqual([429]);
    expect(await statusesOf(["2001:db8:1:200::1"], rules)).toEqual([200]);
  });

  it("separates two /64s of one /56 under a rule with ipv6Prefix 64", async () => {
    const rules = [{ name: "v6-per-64", ipv6Prefix: 64, limit: 1, period: "1h", timeout: PATIENT_TIMEOUT }];
    expect(await statusesOf(["2001:db8:2:100::1", "2001:db8:2:100:ffff::2"], rules)).toEqual([200, 429]);
    expect(await statusesOf(["2001:db8:2:101::1"], rules)).toEqual([200]);
  });

  it("gives an IPv4 client and its IPv4-mapped IPv6 address one quota", async () => {
    const rules = [{ name: "v4-mapped", limit: 1, period: "1h", timeout: PATIENT_TIMEOUT }];
    expect(await statusesOf(["192.0.2.150", "::ffff:192.0.2.150", "::ffff:c000:296"], rules)).toEqual([200, 429, 429]);
  });

  it("puts every CF-Connecting-IP that is not an address in the one #none bucket", async () => {
    const rules = [{ name: "not-an-address", limit: 1, period: "1h", timeout: PATIENT_TIMEOUT }];
    expect(await statusesOf(["garbage-1", "garbage-2", "2001:db8::1%eth0", "192.0.2.1:443"], rules)).toEqual([200, 429, 429, 429]);
  });

  it("finds an IPv6 network's state in the admin API under the documented key", async () => {
    const rules = [{ name: "v6-admin", limit: 2, period: "1h", timeout: PATIENT_TIMEOUT }];
    await statusesOf(["2001:db8:3:4ff::9"], rules);
    const url = `http://floodgate.test/__floodgate/state?rule=v6-admin&key=${encodeURIComponent("2001:db8:3:400::/56")}`;
    const res = await send(new Request(url, { headers: { Authorization: `Bearer ${TOKEN}` } }), { rules, ADMIN_TOKEN: TOKEN });
    expect(((await res.json()) as { state: { remaining: number } }).state.remaining).toBe(1);
  });
});

describe("asn and country key parts", () => {
  const rules = [{ name: "per-network", match: { path: "/per-network/*" }, key: ["asn", "country"], limit: 2, period: "1h", timeout: PATIENT_TIMEOUT }];
  const from = (ip: string, cf?: Record<string, unknown>) => new Request("http://floodgate.test/per-network/x", { headers: { "CF-Connecting-IP": ip }, ...(cf ? { cf } : {}) });

  it("counts every address of one network and country together, whatever the client sets", async () => {
    const statuses = [];
    for (const ip of ["192.0.2.1", "192.0.2.2", "198.51.100.3"]) statuses.push((await send(from(ip, { asn: 64500, country: "NL" }), { rules })).status);
    const elsewhere = await send(from("192.0.2.4", { asn: 64500, country: "BE" }), { rules });

    expect(statuses).toEqual([200, 200, 429]);
    expect(elsewhere.status).toBe(200);
  });

  it("counts requests Cloudflare says nothing of under one #none key, never unlimited", async () => {
    const statuses = [];
    const unsaid = [{ ...rules[0], name: "per-network-none" }];
    for (const ip of ["192.0.2.5", "192.0.2.6", "192.0.2.7"]) statuses.push((await send(from(ip), { rules: unsaid })).status);
    expect(statuses).toEqual([200, 200, 429]);
  });
});
