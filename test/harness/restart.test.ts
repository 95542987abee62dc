// floodgate's counts survive `wrangler dev` stopped and started again on the same persistence directory.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startOrigin } from "../setup/origin-server";
import { arrivals, originUrlOf, startWranglerDev, type WranglerDev } from "./wrangler-dev";

/** The statuses of `count` requests sent one after another. */
async function statuses(dev: WranglerDev, count: number, tag: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const response = await dev.fetch(`/${tag}/${i}`);
    await response.arrayBuffer();
    out.push(response.status);
  }
  return out;
}

/** The statuses of `count` requests to `/<tag>/<phase>/<i>`, one after another. */
async function tagged(dev: WranglerDev, tag: string, phase: string, count: number): Promise<number[]> {
  return statuses(dev, count, `${tag}/${phase}`);
}

/**
 * Every strict algorithm, each a rule of its own on its own path, `restart-<algorithm><suffix>`,
 * `limit` a day (gcra's burst makes it `limit` at once).
 */
function everyAlgorithm(limit: number, suffix = ""): { tag: string; rule: Record<string, unknown> }[] {
  const algorithms: Record<string, Record<string, unknown>> = {
    "sliding-window": {},
    "token-bucket": {},
    "fixed-window": {},
    "sliding-log": {},
    gcra: { burst: limit - 1 },
  };
  // A loaded machine's slow decision waits (10 s), and one slower still is denied: never admitted by
  // the isolate's own count (onError local), which a new isolate after the restart would not know of.
  return Object.entries(algorithms).map(([algorithm, fields]) => ({
    tag: `restart-${algorithm}${suffix}`,
    rule: { name: `restart-${algorithm}${suffix}`, match: { path: `/restart-${algorithm}${suffix}/*` }, key: "global", algorithm, limit, period: "1d", timeout: "10s", onError: "deny", ...fields },
  }));
}

describe("a wrangler dev restart in the middle of traffic", () => {
  let dev: WranglerDev | undefined;
  let dir: string | undefined;
  let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;

  afterEach(async () => {
    await dev?.kill();
    await origin?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    dev = dir = origin = undefined;
  });

  it("keeps a strict key's count: 20 admitted before, exactly 10 of 30 after, 30 in the window", async () => {
    // A period of an hour, far longer than the test: the 20 counted before the restart still
    // weigh more than 19 for minutes, even if a bucket or window boundary passes in between.
    const vars = {
      ORIGIN_URL: "demo",
      RATE_LIMIT_RULES: JSON.stringify([{ name: "restart", key: "global", limit: 30, period: "1h" }]),
    };
    dir = await mkdtemp(join(tmpdir(), "floodgate-restart-"));
    dev = await startWranglerDev({ persistTo: dir, vars });
    expect(await statuses(dev, 20, "before")).toEqual(Array(20).fill(200));

    await dev.stop();
    dev = await startWranglerDev({ persistTo: dir, vars });
    const after = await statuses(dev, 30, "after");
    expect(after).toEqual([...Array(10).fill(200), ...Array(20).fill(429)]);
  }, 60_000);

  it("killed (SIGKILL) under concurrent load, every strict algorithm's key passes no more than its limit to the origin", { timeout: 180_000 }, async () => {
    const limit = 40;
    const keys = everyAlgorithm(limit);
    origin = await startOrigin();
    const originUrl = originUrlOf(origin);
    const vars = { ORIGIN_URL: originUrl, RATE_LIMIT_RULES: JSON.stringify(keys.map((k) => k.rule)) };
    dir = await mkdtemp(join(tmpdir(), "floodgate-restart-"));
    dev = await startWranglerDev({ persistTo: dir, vars });
    // Three clients per key, each sending as soon as its last answer came, until the kill cuts them off.
    let live: WranglerDev | undefined = dev;
    const client = async (tag: string, n: number) => {
      // A request or a body cut off by the kill rejects: that is the kill, not a failure.
      for (let i = 0; live; i++) await live.fetch(`/${tag}/before-${n}-${i}`).then((r) => r.arrayBuffer()).catch(() => undefined);
    };
    const clients = keys.flatMap(({ tag }) => [0, 1, 2].map((n) => client(tag, n)));
    while ((await Promise.all(keys.map(async ({ tag }) => (await arrivals(originUrl, tag)).length))).some((n) => n < limit / 4)) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    live = undefined;
    await dev.kill();
    await Promise.all(clients);
    const before = await Promise.all(keys.map(async ({ tag }) => (await arrivals(originUrl, tag)).length));

    dev = await startWranglerDev({ persistTo: dir, vars });
    const after = await Promise.all(keys.map(({ tag }) => tagged(dev!, tag, "after", limit)));
    const arrived = await Promise.all(keys.map(async ({ tag }) => (await arrivals(originUrl, tag)).length));

    // Cut off mid-way, each key had some of its limit left, and the restart did not give it more.
    expect(before.every((n) => n < limit), `before the kill: ${before.join(", ")}`).toBe(true);
    expect(after.map((s) => s.includes(429))).toEqual(keys.map(() => true));
    expect(Math.max(...arrived), `at the origin: ${arrived.join(", ")}`).toBeLessThanOrEqual(limit);
  });

  it("a rule's algorithm or limit changed across the restart carries each key's count over: no fresh quota", { timeout: 180_000 }, async () => {
    const limit = 20;
    const keys = everyAlgorithm(limit);
    // Each key's rule turns into the next algorithm of the list, same name and limit; two more keys keep theirs and lower or raise the limit.
    const changed: Record<string, unknown>[] = keys.map((k, i) => ({ ...keys[(i + 1) % keys.length]!.rule, name: k.rule.name, match: k.rule.match }));
    const lowered = everyAlgorithm(limit, "-lowered")[0]!;
    const raised = everyAlgorithm(limit, "-raised")[1]!;
    const before = [...keys.map((k) => k.rule), lowered.rule, raised.rule];
    const after = [...changed, { ...lowered.rule, limit: 10 }, { ...raised.rule, limit: 30 }];
    const all = [...keys, lowered, raised];
    origin = await startOrigin();
    const originUrl = originUrlOf(origin);
    dir = await mkdtemp(join(tmpdir(), "floodgate-restart-"));
    dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: originUrl, RATE_LIMIT_RULES: JSON.stringify(before) } });
    const first = await Promise.all(all.map(({ tag }) => tagged(dev!, tag, "before", 12)));

    await dev.kill();
    dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: originUrl, RATE_LIMIT_RULES: JSON.stringify(after) } });
    const second = await Promise.all(all.map(({ tag }) => tagged(dev!, tag, "after", 30)));
    const arrived = await Promise.all(all.map(async ({ tag }) => (await arrivals(originUrl, tag)).length));

    expect(first.map((s) => s.filter((status) => status === 200).length)).toEqual(all.map(() => 12));
    // Every changed algorithm: 20 in all, its 12 counted under the new one.
    expect(arrived.slice(0, keys.length), changed.map((r) => r.algorithm).join(", ")).toEqual(keys.map(() => limit));
    // A sliding window lowered to 10, below the 12 used: nothing more. A token bucket raised to 30: its 18 more, not 30.
    expect(second[keys.length]!.includes(200)).toBe(false);
    expect(arrived.slice(keys.length)).toEqual([12, 30]);
  });
});
