// What floodgate tells an operator: Analytics Engine points (a recording binding, and Miniflare's own), JSON log lines, how long requests waited on an object, never a raw key.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { keyHash } from "../../src/metrics/analytics";
import type { Env } from "../../src/env";
import { metrics } from "../../src/metrics/metrics";
import { dispatch, send } from "../helpers/worker";

const get = (path: string, ip: string) => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });

/** A real binding in shape: it records what it is given, as the Analytics Engine would store it. */
function recorder() {
  const points: AnalyticsEngineDataPoint[] = [];
  return { points, dataset: { writeDataPoint: (point?: AnalyticsEngineDataPoint) => void points.push(point!) } };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("Analytics Engine", () => {
  it("writes one point per decision: the rule as index, the key only as its keyed hash, the weight as a double", async () => {
    const { points, dataset } = recorder();
    const rules = [{ name: "ae-one", limit: 1, period: "1m" }];
    const bindings = { rules, ANALYTICS: dataset as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "secret" };
    await send(get("/ae-one/a", "192.0.2.180"), bindings);
    await send(get("/ae-one/b", "192.0.2.180"), bindings);

    const hash = await keyHash("secret", "192.0.2.180");
    expect(points).toEqual([
      { indexes: ["ae-one"], blobs: ["ae-one", "allowed", "", "strict", "sliding-window", hash], doubles: [1, 0, 1] },
      { indexes: ["ae-one"], blobs: ["ae-one", "denied", "limit", "strict", "sliding-window", hash], doubles: [1, 0, 1] },
    ]);
    expect(JSON.stringify(points)).not.toContain("192.0.2.180");
  });

  it("writes a dry-run rule's would-be refusal of a malformed cost as a point too, as the decisions metric counts it", async () => {
    const { points, dataset } = recorder();
    const rules = [{ name: "ae-dry-cost", limit: 5, period: "1m", cost: "header:x-cost", dryRun: true }];
    const bindings = { rules, ANALYTICS: dataset as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "secret" };
    const request = new Request("http://floodgate.test/ae-dry-cost/a", { headers: { "CF-Connecting-IP": "192.0.2.186", "x-cost": "abc" } });
    expect((await send(request, bindings)).status).toBe(200);

    const hash = await keyHash("secret", "192.0.2.186");
    expect(points).toEqual([{ indexes: ["ae-dry-cost"], blobs: ["ae-dry-cost", "dry_run_denied", "invalid-request", "strict", "sliding-window", hash], doubles: [0, 0, 1] }]);
  });

  it("writes an enforced rule's 400 for a malformed cost as a denial's point, reason invalid-request", async () => {
    const { points, dataset } = recorder();
    const rules = [{ name: "ae-bad-cost", limit: 5, period: "1m", cost: "header:x-cost" }];
    const bindings = { rules, ANALYTICS: dataset as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "secret" };
    const request = new Request("http://floodgate.test/ae-bad-cost/a", { headers: { "CF-Connecting-IP": "192.0.2.187", "x-cost": "1.5" } });
    const before = metrics.value("floodgate_decisions_total", { rule: "ae-bad-cost", decision: "denied" });
    expect((await send(request, bindings)).status).toBe(400);

    const hash = await keyHash("secret", "192.0.2.187");
    expect(points).toEqual([{ indexes: ["ae-bad-cost"], blobs: ["ae-bad-cost", "denied", "invalid-request", "strict", "sliding-window", hash], doubles: [0, 0, 1] }]);
    expect(metrics.value("floodgate_decisions_total", { rule: "ae-bad-cost", decision: "denied" }) - before).toBe(1);
  });

  it("samples by ANALYTICS_SAMPLE and weighs each point by its inverse, so sums stay true", async () => {
    const { points, dataset } = recorder();
    vi.spyOn(Math, "random").mockReturnValueOnce(0.1).mockReturnValueOnce(0.3);
    const bindings = { rules: [{ name: "ae-sample", limit: 9, period: "1m" }], ANALYTICS: dataset as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "s", ANALYTICS_SAMPLE: "0.25" };
    await send(get("/ae-sample/a", "192.0.2.181"), bindings);
    await send(get("/ae-sample/b", "192.0.2.181"), bindings);

    expect(points).toHaveLength(1);
    expect(points[0]!.doubles![2]).toBe(4);
  });

  it("never lets a failing writeDataPoint affect the request, and counts and logs the failure", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const failing = { writeDataPoint: () => { throw new Error("dataset down"); } };
    const before = metrics.value("floodgate_errors_total", { kind: "analytics" });
    const response = await send(get("/ae-fail/a", "192.0.2.182"), { rules: [{ name: "ae-fail", limit: 5, period: "1m" }], ANALYTICS: failing as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "s" });
    expect(response.status).toBe(200);
    expect(metrics.value("floodgate_errors_total", { kind: "analytics" }) - before).toBe(1);
    expect(lines).toEqual([{ event: "error", kind: "analytics", rule: "ae-fail", message: "dataset down" }]);
  });

  it("records a request counted under #overflow by the hash of #overflow, the key its object holds, not the client's own", async () => {
    const { points, dataset } = recorder();
    const rules = [{ name: "ae-overflow", key: "header:x-key", limit: 1, period: "1m", newKeysPerSecond: 1 }];
    const bindings = { rules, ANALYTICS: dataset as unknown as AnalyticsEngineDataset, ANALYTICS_HASH_KEY: "secret" };
    const request = (key: string) => new Request("http://floodgate.test/ae-overflow", { headers: { "x-key": key } });
    const statuses = [];
    for (const key of ["k1", "k2", "k3"]) statuses.push((await send(request(key), bindings)).status);

    expect(statuses).toEqual([200, 200, 429]);
    const [own, overflow] = [await keyHash("secret", "k1"), await keyHash("secret", "#overflow")];
    expect(points.map((p) => [p.blobs![1], p.blobs![5]])).toEqual([["allowed", own], ["allowed", overflow], ["denied", overflow]]);
  });

  it("writes to Miniflare's own Analytics Engine binding without error", async () => {
    const real = (env as unknown as { ANALYTICS_MINIFLARE: AnalyticsEngineDataset }).ANALYTICS_MINIFLARE;
    const before = metrics.value("floodgate_errors_total", { kind: "analytics" });
    const response = await send(get("/ae-real/a", "192.0.2.183"), { rules: [{ name: "ae-real", limit: 5, period: "1m" }], ANALYTICS: real, ANALYTICS_HASH_KEY: "s" });
    expect(response.status).toBe(200);
    expect(metrics.value("floodgate_errors_total", { kind: "analytics" })).toBe(before);
  });

  it.each([["2", "ANALYTICS_SAMPLE"], ["-0.1", "ANALYTICS_SAMPLE"], ["half", "ANALYTICS_SAMPLE"]])("answers an ANALYTICS_SAMPLE of %j with a 500 naming the var", async (sample, name) => {
    const response = await send(get("/ae-bad/a", "192.0.2.184"), { rules: [], ANALYTICS_SAMPLE: sample });
    expect(response.status).toBe(500);
    expect(((await response.json()) as { detail: string }).detail.startsWith(`${name}: `)).toBe(true);
  });

  it("serves traffic with ANALYTICS_SAMPLE set while ANALYTICS is not bound, and warns once in a JSON line naming both", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const bindings = { rules: [{ name: "ae-unbound", limit: 5, period: "1m" }], ANALYTICS_SAMPLE: "0.5" };
    const answers = [await send(get("/ae-unbound/a", "192.0.2.189"), bindings), await send(get("/ae-unbound/b", "192.0.2.189"), bindings)];

    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    expect(lines).toEqual([{ event: "warning", kind: "config", message: expect.stringMatching(/^ANALYTICS_SAMPLE: .*no ANALYTICS dataset is bound/) }]);
  });

  it("asks for ANALYTICS_HASH_KEY while ANALYTICS is bound, rather than write keys unhashed or nothing at all", async () => {
    const { dataset } = recorder();
    const response = await send(get("/ae-nokey/a", "192.0.2.185"), { rules: [], ANALYTICS: dataset as unknown as AnalyticsEngineDataset });
    expect(((await response.json()) as { detail: string }).detail).toMatch(/^ANALYTICS_HASH_KEY: required while ANALYTICS is bound/);
  });
});

describe("structured logs", () => {
  it("writes a rule's 400 for a malformed cost as one line with status 400, never the key", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const request = new Request("http://floodgate.test/log-bad-cost/a", { headers: { "CF-Connecting-IP": "192.0.2.188", "x-cost": "abc" } });
    await send(request, { rules: [{ name: "log-bad-cost", limit: 5, period: "1m", cost: "header:x-cost" }] });

    expect(lines).toEqual([{ event: "denied", rule: "log-bad-cost", decision: "denied", reason: "invalid-request", retryAfterMs: 0, status: 400, keyHash: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(JSON.stringify(lines)).not.toContain("192.0.2.188");
  });

  it("writes each denial as one JSON object with rule, decision, reason, keyHash and status, never the key", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const rules = [{ name: "log-deny", key: "header:x-api-key", limit: 1, period: "1m" }];
    const request = () => new Request("http://floodgate.test/log-deny/x", { headers: { "x-api-key": "sk_live_secret_123" } });
    await send(request(), { rules, ANALYTICS_HASH_KEY: "s" });
    await send(request(), { rules, ANALYTICS_HASH_KEY: "s" });

    expect(lines).toEqual([{ event: "denied", rule: "log-deny", decision: "denied", reason: "limit", retryAfterMs: expect.any(Number), status: 429, keyHash: await keyHash("s", "sk_live_secret_123") }]);
    expect(JSON.stringify(lines)).not.toContain("sk_live");
  });

  it("writes an unreachable origin and an invalid configuration as one JSON line each, at the error level", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
    await send(get("/log-origin/x", "192.0.2.187"), { rules: [{ name: "log-origin", limit: 5, period: "1m" }], ORIGIN_URL: "http://127.0.0.1:1" });
    await send(get("/log-config/x", "192.0.2.187"), { rules: [{ name: "log-config", limit: 5, period: "ten" }] });

    expect(lines.every((line) => !line.includes("\n"))).toBe(true);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      { event: "error", kind: "origin", message: expect.any(String) },
      { event: "error", kind: "config", message: expect.stringMatching(/^rules\[0\] \("log-config"\)\.period: expected a duration/) },
    ]);
  });

  it("gives each kind of error its own lines: a flood of origin failures leaves room for a configuration error", async () => {
    const t0 = Date.now() + 7_200_000;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(t0);
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const down = { rules: [{ name: "log-kinds", limit: 100, period: "1m" }], ORIGIN_URL: "http://127.0.0.1:1" };
    for (let i = 0; i < 15; i++) await send(get("/log-kinds/x", "192.0.2.188"), down);
    await send(get("/log-kinds/x", "192.0.2.188"), { rules: [{ name: "log-kinds-bad", limit: 5, period: "ten" }] });
    vi.useRealTimers();

    expect(lines.filter((l) => l.kind === "origin")).toHaveLength(10);
    expect(lines.filter((l) => l.kind === "config")).toHaveLength(1);
  });

  it("writes at most 10 lines a second per kind under a flood, and says how many it left out", async () => {
    // Ahead of the real clock, so the lines other tests wrote in this isolate are long refilled.
    const t0 = Date.now() + 3_600_000;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(t0);
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    const rules = [{ name: "log-flood", limit: 1, period: "1h" }];
    for (let i = 0; i < 40; i++) await send(get("/log-flood/x", "192.0.2.186"), { rules });
    const floodLines = lines.filter((l) => l.rule === "log-flood");
    vi.setSystemTime(t0 + 2_000);
    await send(get("/log-flood/x", "192.0.2.186"), { rules });
    vi.useRealTimers();

    expect(floodLines.length).toBeLessThanOrEqual(10);
    expect(lines.filter((l) => l.rule === "log-flood").at(-1)).toMatchObject({ dropped: 39 - floodLines.length });
  });
});

describe("the wait histogram", () => {
  const waits = (rule: string, mode: string) => metrics.observations("floodgate_object_wait_seconds", { rule, mode });

  it("observes every strict request that called its object", async () => {
    const rules = [{ name: "wait-strict", limit: 5, period: "1m" }];
    await send(get("/wait-strict/a", "192.0.2.190"), { rules });
    await send(get("/wait-strict/b", "192.0.2.190"), { rules });
    expect(waits("wait-strict", "strict")).toBe(2);
  });

  it("observes a fast request only when its lease could not decide it", async () => {
    const rules = [{ name: "wait-fast", mode: "fast", limit: 100, period: "1m" }];
    for (let i = 0; i < 3; i++) await send(get(`/wait-fast/${i}`, "192.0.2.191"), { rules });
    expect(waits("wait-fast", "fast")).toBe(1);
  });

  it("observes a request whose object never answered, for as long as its timeout", async () => {
    const rules = [{ name: "wait-slow", limit: 5, period: "1m", timeout: "200ms", onError: "allow" }];
    const before = metrics.render();
    const { settled } = await dispatch(get("/wait-slow/a", "192.0.2.192"), { rules, LIMITER: env.SLOW as unknown as Env["LIMITER"] });
    await settled;
    expect(waits("wait-slow", "strict")).toBe(1);
    expect(before).not.toContain('rule="wait-slow"');
    // Past the timeout, by no more than a loaded machine adds to its timer (a 100 ms timeout in the 0.25 bucket left it
    // 150 ms), and far short of the 3 s the object takes.
    expect(metrics.render()).toContain('floodgate_object_wait_seconds_bucket{le="0.1",mode="strict",rule="wait-slow"} 0');
    expect(metrics.render()).toContain('floodgate_object_wait_seconds_bucket{le="1",mode="strict",rule="wait-slow"} 1');
  });
});
