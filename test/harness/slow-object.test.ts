// A fast key whose object answers slower than the rule's timeout: after one late sync the object is left alone, and onError answers at once.
import { describe, expect, it } from "vitest";
import { useClusterFixture } from "./fixture";

const harness = useClusterFixture();

describe("a fast rule whose object is slower than its timeout", () => {
  it("waits out the timeout once, then answers by onError at once while the key backs off, as strict mode does", async () => {
    const rules = [
      { name: "slow-fast", match: { path: "/slow-fast/*" }, key: "global", limit: 50, period: "10s", mode: "fast", onError: "deny", timeout: "300ms" },
      { name: "slow-strict", match: { path: "/slow-strict/*" }, key: "global", limit: 50, period: "10s", onError: "deny", timeout: "300ms" },
    ];
    const cluster = await harness.start({ isolates: 1, objectDelayMs: 2_000, rules });
    const waited = async (prefix: string) => {
      const slow: number[] = [];
      for (let i = 0; i < 10; i++) {
        const started = Date.now();
        const response = await cluster.fetch(0, `/${prefix}/${i}`);
        await response.arrayBuffer();
        // onError's 429, or the object's own answer once the slow call comes back (2 s on): never a failure.
        expect([200, 429]).toContain(response.status);
        if (Date.now() - started >= 250) slow.push(i);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return slow;
    };

    const fast = await waited("slow-fast");
    const strict = await waited("slow-strict");
    expect(fast.length).toBeLessThanOrEqual(strict.length);
    expect(fast.length).toBeLessThanOrEqual(2);
  }, 60_000);
});
