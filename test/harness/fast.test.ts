// Fast mode across 8 isolates: the limit holds per window under overload, nearly all traffic passes at the limit, and the object hears from each isolate about once a sync interval.
import { describe, expect, it } from "vitest";
import type { Cluster } from "./cluster";
import { useClusterFixture } from "./fixture";
import { drive } from "./load";

const harness = useClusterFixture();

const ISOLATES = 8;
const LIMIT = 100;
const PERIOD_MS = 2_000;
const SYNC_MS = 100;
const rule = { name: "h-fast", key: "global", limit: LIMIT, period: `${PERIOD_MS}ms`, mode: "fast", sync: `${SYNC_MS}ms` };

/** Admitted requests per epoch-aligned window, by the time each reached the origin. */
async function perWindow(tag: string): Promise<number[]> {
  const log = (await (await fetch(`${harness.originUrl()}/__origin/log?tag=${tag}`)).json()) as { at: number }[];
  const counts = new Map<number, number>();
  for (const { at } of log) counts.set(Math.floor(at / PERIOD_MS), (counts.get(Math.floor(at / PERIOD_MS)) ?? 0) + 1);
  return [...counts.values()];
}

async function objectCalls(from: Cluster): Promise<number> {
  let total = 0;
  for (let i = 0; i < ISOLATES; i++) {
    const line = (await from.metrics(i)).split("\n").find((l) => l.startsWith("floodgate_durable_object_calls_total{"));
    total += line ? Number(line.split(" ")[1]) : 0;
  }
  return total;
}

/** Waits for the start of a window, so a run covers whole windows. */
async function alignToWindow(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, PERIOD_MS - (Date.now() % PERIOD_MS) + 5));
}

describe("fast mode across 8 isolates", () => {
  for (const distribution of ["uniform", "skewed"] as const) {
    it(`never lets more than the limit through in a window at 10× the limit, ${distribution}`, async () => {
      const cluster = await harness.start({ isolates: ISOLATES, rules: [rule] });
      const tag = `fast10-${distribution}`;
      await alignToWindow();
      const result = await drive(cluster, {
        durationMs: 2 * PERIOD_MS,
        ratePerSecond: (10 * LIMIT * 1_000) / PERIOD_MS,
        distribution,
        latencies: true,
        path: (n) => `/${tag}/${n}`,
      });
      expect(result.errors).toBe(0);
      // The origin sees a request a little after floodgate decided it, so one decided just before a
      // window closed can land just after: allow what the admitted rate brings in that long.
      const inFlight = Math.ceil(((LIMIT / PERIOD_MS) * result.latencies!.max) + 1);
      for (const admitted of await perWindow(tag)) expect(admitted).toBeLessThanOrEqual(LIMIT + inFlight);
      expect(result.allowed).toBeGreaterThanOrEqual(LIMIT);
      // The cluster's start, a window's wait and the driver's 18 s deadline: one such run took 29.2 s of the default 30 s on a loaded machine.
    }, 60_000);
  }

  it("says no unit is left on a 429 of a one-unit request, whichever isolate denies it", async () => {
    const rules = ["sliding-window", "token-bucket", "fixed-window", "sliding-log"].map((algorithm) => ({ name: `h-r0-${algorithm}`, match: { path: `/r0-${algorithm}/*` }, key: "global", algorithm, limit: 50, period: "10s", mode: "fast" }));
    const cluster = await harness.start({ isolates: 6, rules });
    for (const { algorithm } of rules) {
      const answers = await Promise.all(Array.from({ length: 120 }, async (_, i) => {
        const response = await cluster.fetch(i % 6, `/r0-${algorithm}/${i}`);
        await response.arrayBuffer();
        return { status: response.status, remaining: response.headers.get("X-RateLimit-Remaining") };
      }));
      const denied = answers.filter((a) => a.status === 429);
      expect(denied.length, algorithm).toBeGreaterThan(0);
      expect(denied.filter((a) => a.remaining !== "0"), algorithm).toEqual([]);
    }
  });

  it("lets through at the limit nearly as much as strict mode does", async () => {
    const admitted: Record<string, number> = {};
    for (const mode of ["strict", "fast"]) {
      const { sync: _sync, ...base } = rule;
      const cluster = await harness.start({ isolates: ISOLATES, rules: [mode === "fast" ? rule : { ...base, mode }] });
      await alignToWindow();
      const result = await drive(cluster, {
        durationMs: 2 * PERIOD_MS,
        ratePerSecond: (LIMIT * 1_000) / PERIOD_MS,
        path: (n) => `/fast1-${mode}/${n}`,
      });
      expect(result.errors).toBe(0);
      admitted[mode] = result.allowed;
    }
    // At this scale each isolate sees a request every 160 ms against a 100 ms sync, the hardest case
    // for leases; the 2 % target is read by the bench at period 60 s and sync 1 s (bench/RESULTS.md).
    expect(admitted.fast).toBeGreaterThanOrEqual(0.9 * admitted.strict!);
    // Two clusters' starts, windows and drives, each up to the driver's 18 s deadline on a loaded machine.
  }, 90_000);

  it("calls the object about once per isolate per sync interval, not once per request", async () => {
    // At 10× the limit and the default 1 s sync, each isolate sees many requests an interval even
    // when a loaded machine keeps a fraction of the pace. At a 100 ms sync it saw about one: a loaded
    // CI run sent 1,596 requests in the 18 s the driver allows (of 2,000 in 4 s), and the calls, which
    // follow time (582, within the bound below), came to more than a third of them.
    const calls1s = { name: "h-fast-calls", key: "global", limit: 1_000, period: "20s", mode: "fast" };
    const syncMs = 1_000;
    const cluster = await harness.start({ isolates: ISOLATES, rules: [calls1s] });
    const result = await drive(cluster, { durationMs: 4_000, ratePerSecond: 500, path: (n) => `/fastcalls/${n}` });
    expect(result.errors).toBe(0);
    const calls = await objectCalls(cluster);
    // What the object hears follows time, not traffic: one booked call per isolate per interval,
    // plus one when a lease runs dry (README, *Strict and fast*). Counted over the run as it went,
    // which lasts longer than asked when the machine cannot keep the pace.
    const intervals = Math.ceil(result.elapsedMs / syncMs) + 1;
    expect(calls).toBeLessThanOrEqual(ISOLATES * intervals * 2);
    expect(calls).toBeLessThan(result.sent / 3);
    // The cluster's start and the driver's 18 s deadline, with room on a loaded machine.
  }, 60_000);
});
