// A fast rule's block across isolates: the object records it, and every isolate denies the key from its next sync on.
import { describe, expect, it } from "vitest";
import { useClusterFixture } from "./fixture";

const harness = useClusterFixture();

describe("block in fast mode across isolates", () => {
  it("reaches an isolate that never saw the denial within a sync interval, and says when it ends", async () => {
    const rule = { name: "h-block", key: "global", limit: 10, period: "1h", mode: "fast", sync: "200ms", block: "1h" };
    const cluster = await harness.start({ isolates: 2, rules: [rule] });
    // The other isolate takes part first, so it holds a lease when the block starts.
    expect((await cluster.fetch(1, "/block-fast/warm")).status).toBe(200);

    const first = [];
    for (let i = 0; i < 15; i++) first.push((await cluster.fetch(0, `/block-fast/a-${i}`)).status);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const other = [];
    for (let i = 0; i < 3; i++) other.push(await cluster.fetch(1, `/block-fast/b-${i}`));
    const count = (await (await fetch(`${harness.originUrl()}/__origin/count?tag=block-fast`)).json()) as { count: number };

    expect(first).toContain(429);
    expect(other.map((r) => r.status)).toEqual([429, 429, 429]);
    expect(Number(other[2]!.headers.get("Retry-After"))).toBeGreaterThan(3_000);
    expect(count.count).toBeLessThanOrEqual(10);
  });
});
