// The load driver against a fake cluster: how it spreads, paces, counts and stops.
import { describe, expect, it } from "vitest";
import { drive } from "./load";

/** A cluster whose isolates answer at once with `status(isolate)`, after `delayMs`. */
function fakeCluster(isolates: number, { status = () => 200, delayMs = 0 }: { status?: (isolate: number) => number; delayMs?: number } = {}) {
  const calls: { isolate: number; url: string; at: number }[] = [];
  return {
    calls,
    fronts: new Array(isolates).fill(null),
    async fetch(isolate: number, url: string | URL, init?: RequestInit): Promise<Response> {
      calls.push({ isolate, url: String(url), at: performance.now() });
      if (delayMs > 0) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, delayMs);
          init?.signal?.addEventListener("abort", () => (clearTimeout(timer), reject(init.signal!.reason)));
        });
      }
      return new Response("x", { status: status(isolate) });
    },
  };
}

describe("drive", () => {
  it("spreads uniform traffic round-robin", async () => {
    const cluster = fakeCluster(4);
    const result = await drive(cluster, { requests: 10, ratePerSecond: 5000, distribution: "uniform" });
    expect(cluster.calls.map((c) => c.isolate)).toEqual([0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
    expect(result.perIsolate.map((t) => t.sent)).toEqual([3, 3, 2, 2]);
  });

  it("puts the skew's share on isolate 0 and spreads the rest evenly", async () => {
    const cluster = fakeCluster(5);
    const result = await drive(cluster, { requests: 100, ratePerSecond: 5000, distribution: "skewed", skew: 0.6 });
    expect(result.perIsolate.map((t) => t.sent)).toEqual([60, 10, 10, 10, 10]);
  });

  it("follows explicit weights", async () => {
    const cluster = fakeCluster(3);
    const result = await drive(cluster, { requests: 60, ratePerSecond: 5000, distribution: { weights: [3, 0, 1] } });
    expect(result.perIsolate.map((t) => t.sent)).toEqual([45, 0, 15]);
  });

  it("paces requests to the rate", async () => {
    const cluster = fakeCluster(2);
    const result = await drive(cluster, { requests: 41, ratePerSecond: 200 });
    // 41 requests at 200/s: the last is due 200 ms after the first.
    expect(result.elapsedMs).toBeGreaterThanOrEqual(199);
    expect(result.elapsedMs).toBeLessThan(1_500);
  });

  it("stops after durationMs at the rate's count", async () => {
    const cluster = fakeCluster(2);
    const result = await drive(cluster, { durationMs: 100, ratePerSecond: 300 });
    expect(result.sent).toBe(30);
  });

  it("counts 2xx and 3xx as allowed, 429 as denied, other failures as errors", async () => {
    const statuses = [200, 302, 429, 500, 400];
    const cluster = fakeCluster(5, { status: (i) => statuses[i]! });
    const result = await drive(cluster, { requests: 10, ratePerSecond: 5000 });
    expect({ allowed: result.allowed, denied: result.denied, errors: result.errors }).toEqual({ allowed: 4, denied: 2, errors: 4 });
    expect(result.statuses).toEqual({ 200: 2, 302: 2, 429: 2, 500: 2, 400: 2 });
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    let inFlight = 0;
    let most = 0;
    const inner = fakeCluster(1, { delayMs: 20 });
    const cluster = {
      fronts: inner.fronts,
      async fetch(isolate: number, url: string | URL, init?: RequestInit) {
        most = Math.max(most, ++inFlight);
        try {
          return await inner.fetch(isolate, url, init);
        } finally {
          inFlight--;
        }
      },
    };
    await drive(cluster, { requests: 20, ratePerSecond: 5000, concurrency: 3 });
    expect(most).toBe(3);
  });

  it("gives up on a request at its timeout and counts it as an error", async () => {
    const cluster = fakeCluster(1, { delayMs: 5_000 });
    const result = await drive(cluster, { requests: 2, ratePerSecond: 5000, requestTimeoutMs: 50 });
    expect({ errors: result.errors, statuses: result.statuses }).toEqual({ errors: 2, statuses: { 0: 2 } });
    expect(result.elapsedMs).toBeLessThan(3_000);
  });

  it("stops sending at the deadline and reports what it did not send", async () => {
    const cluster = fakeCluster(1);
    const result = await drive(cluster, { requests: 1_000, ratePerSecond: 100, deadlineMs: 100 });
    expect(result.sent).toBeGreaterThan(0);
    expect(result.sent).toBeLessThanOrEqual(11);
    expect(result.sent + result.unsent).toBe(1_000);
  });

  it("refuses a run that has no end", async () => {
    await expect(drive(fakeCluster(1), { ratePerSecond: 100 })).rejects.toThrow(/requests, durationMs or both/);
  });
});
