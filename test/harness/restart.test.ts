// floodgate's counts survive `wrangler dev` stopped and started again on the same persistence directory.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startWranglerDev, type WranglerDev } from "./wrangler-dev";

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

describe("a wrangler dev restart in the middle of traffic", () => {
  let dev: WranglerDev | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await dev?.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
    dev = dir = undefined;
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
});
