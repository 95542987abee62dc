// Many isolates, one set of Durable Objects, a real origin: strict mode must admit exactly the limit, whatever the spread.
import { describe, expect, it } from "vitest";
import type { Cluster } from "./cluster";
import { useClusterFixture } from "./fixture";
import { drive, type DriveResult } from "./load";

const harness = useClusterFixture();

async function originCount(tag: string): Promise<number> {
  const body = (await (await fetch(`${harness.originUrl()}/__origin/count?tag=${tag}`)).json()) as { count: number };
  return body.count;
}

/** One Prometheus sample's value, 0 when the series is absent. */
function sample(metrics: string, series: string): number {
  const line = metrics.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** What came back and what workerd said, for a failure message. */
function diagnosis(result: DriveResult, from: Cluster): string {
  const said = from.logs().filter((line) => !line.startsWith("stack:"));
  return `statuses ${JSON.stringify(result.statuses)} ${result.errorSamples.join("; ")}\nworkerd said (${said.length} lines), first:\n${said.slice(0, 3).join("\n")}`;
}

describe("the cluster", () => {
  it("runs each front in its own isolate: module state is not shared", async () => {
    const cluster = await harness.start({ isolates: 3, rules: [{ name: "h-iso", key: "global", limit: 100, period: "1m" }] });
    const sends = [3, 1, 0];
    for (const [isolate, n] of sends.entries()) {
      for (let i = 0; i < n; i++) expect((await cluster.fetch(isolate, `/iso/${isolate}-${i}`)).status).toBe(200);
    }

    const allowed = await Promise.all(sends.map(async (_, isolate) => sample(await cluster.metrics(isolate), 'floodgate_decisions_total{decision="allowed",rule="h-iso"}')));
    expect(allowed).toEqual(sends);
    expect(await originCount("iso")).toBe(4);
  });

  it("binds every front to one RateLimiter namespace: a key's quota is shared", async () => {
    const cluster = await harness.start({ isolates: 4, rules: [{ name: "h-shared", key: "global", limit: 3, period: "1m" }] });

    const statuses: number[] = [];
    for (const isolate of [0, 1, 2, 3]) statuses.push((await cluster.fetch(isolate, `/shared/${isolate}`)).status);

    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(await originCount("shared")).toBe(3);
  });

  it("shows the Worker an absolute URL's own host", async () => {
    const cluster = await harness.start({ isolates: 1, rules: [{ name: "h-host", match: { host: "api.example.com" }, key: "global", limit: 1, period: "1m" }] });

    const statuses: number[] = [];
    for (const url of ["https://api.example.com/host/1", "https://api.example.com/host/2", "/host/3"]) {
      statuses.push((await cluster.fetch(0, url)).status);
    }

    expect(statuses).toEqual([200, 429, 200]);
  });
});

describe("strict mode across 8 isolates at 10× the limit", () => {
  const rule = { name: "h-strict", key: "global", limit: 50, period: "1m", mode: "strict" };

  for (const distribution of ["uniform", "skewed"] as const) {
    it(`admits exactly the limit, each once at the origin, and denies the rest with ${distribution} traffic`, async () => {
      const cluster = await harness.start({ isolates: 8, rules: [rule] });
      const tag = `strict-${distribution}`;

      const result = await drive(cluster, { requests: 500, ratePerSecond: 1000, distribution, concurrency: 32, path: (n) => `/${tag}/${n}` });

      const spread = result.perIsolate.map((t) => t.sent);
      expect(spread[0]).toBe(distribution === "uniform" ? 63 : 300);
      expect(Math.min(...spread.slice(1))).toBeGreaterThanOrEqual(distribution === "uniform" ? 62 : 28);
      expect({ allowed: result.allowed, denied: result.denied, errors: result.errors }, diagnosis(result, cluster)).toEqual({ allowed: 50, denied: 450, errors: 0 });
      expect(await originCount(tag)).toBe(50);
    });
  }
});
