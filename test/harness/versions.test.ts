// Two Worker versions live at once over one RateLimiter namespace, as in a gradual deployment: no switch grants a fresh quota.
import { describe, expect, it } from "vitest";
import { useClusterFixture } from "./fixture";
import { drive } from "./load";

const harness = useClusterFixture();

async function originCount(tag: string): Promise<number> {
  const body = (await (await fetch(`${harness.originUrl()}/__origin/count?tag=${tag}`)).json()) as { count: number };
  return body.count;
}

/** Sends `count` requests one after another, alternating between the fronts (versions). */
async function alternate(cluster: Awaited<ReturnType<typeof harness.start>>, count: number, path: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await cluster.fetch(i % cluster.fronts.length, `${path}/${i}`)).status);
  return statuses;
}

describe("two Worker versions live at once", () => {
  it("alternating a sliding window and a token bucket admit the limit, not a fresh quota per switch", async () => {
    const name = "h-versions-algorithm";
    const cluster = await harness.start({
      isolates: 2,
      rules: [],
      versions: [
        [{ name, key: "global", limit: 3, period: "1m" }],
        [{ name, key: "global", algorithm: "token-bucket", limit: 3, period: "1m", burst: 3 }],
      ],
    });

    const statuses = await alternate(cluster, 30, "/versions-algorithm");

    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(await originCount("versions-algorithm")).toBe(3);
  });

  it("a limit lowered in the new version applies at once to what the old one admitted", async () => {
    const name = "h-versions-limit";
    const cluster = await harness.start({
      isolates: 2,
      rules: [],
      versions: [[{ name, key: "global", limit: 10, period: "1m" }], [{ name, key: "global", limit: 3, period: "1m" }]],
    });

    const old = [];
    for (let i = 0; i < 3; i++) old.push((await cluster.fetch(0, `/versions-limit/old-${i}`)).status);
    const lowered = (await cluster.fetch(1, "/versions-limit/new")).status;
    const raisedStill = (await cluster.fetch(0, "/versions-limit/old-3")).status;

    expect(old).toEqual([200, 200, 200]);
    expect(lowered).toBe(429);
    // The old version's own limit (10) still holds for it, counted over both versions' traffic.
    expect(raisedStill).toBe(200);
  });

  it("fast mode: a limit lowered in the new version holds across both versions from one sync interval after its first request", async () => {
    const name = "h-versions-lowered";
    const tag = "versions-lowered";
    const limit = 20;
    const syncMs = 1_000;
    const cluster = await harness.start({
      isolates: 2,
      rules: [],
      versions: [
        [{ name, key: "global", limit: 1_000, period: "1h", mode: "fast", sync: "1s" }],
        [{ name, key: "global", limit, period: "1h", mode: "fast", sync: "1s" }],
      ],
    });
    let n = 0;
    /** About 20 requests a second to each of `fronts`, one after another, until `until`. */
    const traffic = async (fronts: number[], until: number) => {
      while (Date.now() < until) {
        for (const front of fronts) await cluster.fetch(front, `/${tag}/${n++}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };

    // The old version (front 0) admits past the new limit under its own, holding a lease far from it.
    await traffic([0], Date.now() + 2 * syncMs);
    const firstNew = Date.now();
    const lowered = (await cluster.fetch(1, `/${tag}/new-first`)).status;
    // One interval, plus a request's spacing and the hop for the old version's booked call.
    await traffic([0, 1], firstNew + syncMs + 250);
    const counted = await originCount(tag);
    await traffic([0, 1], Date.now() + 3 * syncMs);

    expect(counted).toBeGreaterThan(limit);
    expect(lowered).toBe(429);
    expect(await originCount(tag)).toBe(counted);
  });

  it("fast mode: a lowered limit binds the old version's quiet isolate, which admits no more than it held", { timeout: 60_000 }, async () => {
    const name = "h-versions-quiet";
    const tag = "versions-quiet";
    const cluster = await harness.start({
      isolates: 2,
      rules: [],
      versions: [
        [{ name, limit: 20, period: "1h", mode: "fast" }],
        [{ name, limit: 6, period: "1h", mode: "fast" }],
      ],
      bindings: { ADMIN_TOKEN: "versions-admin" },
    });
    const ip = "203.0.113.53";
    const old: number[] = [];
    for (let i = 0; i < 10; i++) old.push((await cluster.fetch(0, `/${tag}/old-${i}`, { headers: { "CF-Connecting-IP": ip } })).status);
    const state = await cluster.fetch(0, `/__floodgate/state?rule=${name}&key=${ip}`, { headers: { Authorization: "Bearer versions-admin" } });
    const held = ((await state.json()) as { isolate: { leased: number } }).isolate.leased;
    // Then a request every half second, alternating: the new version's first learns the lowered limit.
    const statuses: string[] = [];
    for (let i = 0; i < 20; i++) {
      const front = i % 2;
      statuses.push(`${front ? "B" : "A"}${(await cluster.fetch(front, `/${tag}/alt-${i}`, { headers: { "CF-Connecting-IP": ip } })).status}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(old.every((s) => s === 200)).toBe(true);
    expect(statuses.filter((s) => s === "B200")).toEqual([]);
    expect(statuses.filter((s) => s === "A200").length, `${statuses.join(" ")}; held ${held}`).toBeLessThanOrEqual(held);
  });

  it("fast mode: versions alternating algorithms on 4 isolates at 10× the limit stay within it", async () => {
    const name = "h-versions-fast";
    const limit = 20;
    const cluster = await harness.start({
      isolates: 4,
      rules: [],
      versions: [
        [{ name, key: "global", limit, period: "1h", mode: "fast" }],
        [{ name, key: "global", algorithm: "token-bucket", limit, period: "1h", burst: limit, mode: "fast" }],
      ],
    });

    const result = await drive(cluster, { requests: 10 * limit, ratePerSecond: 400, distribution: "uniform", concurrency: 16, path: (n) => `/versions-fast/${n}` });

    expect(result.errors).toBe(0);
    // A token bucket refilling 20 per hour adds at most one unit over a run of a few seconds.
    expect(await originCount("versions-fast")).toBeLessThanOrEqual(limit + 1);
    expect(result.allowed).toBeGreaterThan(0);
  });
});
