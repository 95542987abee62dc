// The examples/ Workers, built from their own entries and run in workerd as their own wrangler.toml says, beside floodgate where they bind it: an example that rots fails here.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startOrigin } from "../setup/origin-server";
import {
  EXAMPLES,
  QUOTA_EXCEEDED,
  buildEntry,
  concurrently,
  floodgateWorker,
  originCount,
  readWorkerConfig,
  run,
  scratch,
  statusCounts,
  workerOptions,
  type Answer,
  type Running,
} from "./examples";

let origin: Awaited<ReturnType<typeof startOrigin>>;
let out: Awaited<ReturnType<typeof scratch>>;
let running: Running | undefined;
const originUrl = () => `http://127.0.0.1:${origin.port}`;

beforeAll(async () => {
  [origin, out] = await Promise.all([startOrigin(), scratch("floodgate-examples-")]);
});
afterEach(async () => {
  await running?.dispose();
  running = undefined;
});
afterAll(async () => {
  await origin?.close();
  await out?.remove();
});

/** An example's Worker, built with `floodgate` from this checkout's sources, and its config. */
async function example(name: string, configFile = "wrangler.toml") {
  const config = await readWorkerConfig(join(EXAMPLES, name, configFile));
  const built = await buildEntry(config.main, out.dir, `${name}-${configFile.replace(/\W/g, "-")}`, "source");
  return { config, built };
}

/** The floodgate Worker an example binds, from its floodgate.toml, in front of the test's origin. */
async function floodgateFor(name: string) {
  return floodgateWorker(await readWorkerConfig(join(EXAMPLES, name, "floodgate.toml")), originUrl());
}

/** Checks a 429 is floodgate's: problem+json of the quota-exceeded type naming the rule, with Retry-After and the rule's policy. */
function expectFloodgateDenial(answer: Answer, rule: string, policy: string): void {
  expect(answer.status).toBe(429);
  expect(answer.headers.get("content-type")).toBe("application/problem+json");
  expect(JSON.parse(answer.body)).toEqual({
    type: QUOTA_EXCEEDED,
    title: expect.any(String),
    status: 429,
    detail: expect.stringContaining(rule),
    "violated-policies": [rule],
  });
  expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  expect(answer.headers.get("ratelimit-policy")).toBe(policy);
}

describe("examples/hono-app", () => {
  it("admits exactly the rule's limit of 40 concurrent requests for one API key, exposes c.get('rateLimit'), and denies the rest with floodgate's 429", async () => {
    const { config, built } = await example("hono-app");
    expect(config.durableObjects).toEqual([{ name: "LIMITER", className: "RateLimiter" }]);
    expect(config.sqliteClasses).toContain("RateLimiter");
    running = await run([workerOptions(config, built.path)]);

    const answers = await concurrently(40, () => running!.fetch("/api/quota", { headers: { "x-api-key": "k-hono" } }));

    expect(statusCounts(answers)).toEqual({ 200: 5, 429: 35 });
    const results = answers.filter((a) => a.status === 200).map((a) => JSON.parse(a.body) as { success: boolean; limit: number; remaining: number; rule: string });
    expect(results.every((r) => r.success && r.rule === "api" && r.limit === 5)).toBe(true);
    expect(results.map((r) => r.remaining).sort()).toEqual([0, 1, 2, 3, 4]);
    for (const answer of answers.filter((a) => a.status === 429)) expectFloodgateDenial(answer, "api", '"api";q=5;w=60');
    // Per key: another API key has its own quota.
    expect((await running.fetch("/api/quota", { headers: { "x-api-key": "k-other" } })).status).toBe(200);
  });

  it("limits /login with the library's limiter (token bucket of 3) per client address", async () => {
    const { config, built } = await example("hono-app");
    running = await run([workerOptions(config, built.path)]);

    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await running.fetch("/login", { method: "POST", headers: { "cf-connecting-ip": "198.51.100.20" } })).status);
    const elsewhere = await running.fetch("/login", { method: "POST", headers: { "cf-connecting-ip": "198.51.100.21" } });

    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(await elsewhere.json()).toEqual({ ok: true, remaining: 2 });
  });

  it("charges /complete what the model used once it has answered: a budget of 1,000 tokens an hour, owed past its last call", async () => {
    const { config, built } = await example("hono-app");
    running = await run([workerOptions(config, built.path)]);

    const statuses: number[] = [];
    for (const tokens of [600, 600, 1]) statuses.push((await running.fetch(`/complete?tokens=${tokens}`, { method: "POST", headers: { "x-api-key": "k-tokens" } })).status);
    const other = await running.fetch("/complete?tokens=1", { method: "POST", headers: { "x-api-key": "k-other" } });

    expect(statuses).toEqual([200, 200, 429]);
    expect(other.status).toBe(200);
  });

  it("answers /complete with a 400 for a token count that is not a whole number, rather than charging it where the error goes unseen", async () => {
    const { config, built } = await example("hono-app");
    running = await run([workerOptions(config, built.path)]);

    const statuses: number[] = [];
    for (const tokens of ["0.5", "abc", "-3"]) statuses.push((await running.fetch(`/complete?tokens=${tokens}`, { method: "POST", headers: { "x-api-key": "k-bad-tokens" } })).status);

    expect(statuses).toEqual([400, 400, 400]);
  });

  it("limits /login per IPv6 network: a client rotating through the addresses of its /56 gets no fresh attempts", async () => {
    const { config, built } = await example("hono-app");
    running = await run([workerOptions(config, built.path)]);

    const statuses: number[] = [];
    for (const address of ["2001:db8:abcd:1200::1", "2001:db8:abcd:1200::2", "2001:db8:abcd:12ab::3", "2001:db8:abcd:12ff:ffff:ffff:ffff:4"]) {
      statuses.push((await running.fetch("/login", { method: "POST", headers: { "cf-connecting-ip": address } })).status);
    }
    const nextNetwork = await running.fetch("/login", { method: "POST", headers: { "cf-connecting-ip": "2001:db8:abcd:1300::1" } });

    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(await nextNetwork.json()).toEqual({ ok: true, remaining: 2 });
  });
});

describe("examples/service-binding", () => {
  it("binds floodgate as its wrangler.toml says: FLOODGATE, the Floodgate entrypoint, props.rule", async () => {
    const { config } = await example("service-binding");
    expect(config.services).toEqual([{ binding: "FLOODGATE", service: "floodgate", entrypoint: "Floodgate", props: { rule: "login" } }]);
  });

  it("limit: grants exactly 5 of 40 concurrent logins to one account under props.rule, and others keep their quota", async () => {
    const { config, built } = await example("service-binding");
    running = await run([workerOptions(config, built.path), await floodgateFor("service-binding")]);

    const answers = await concurrently(40, () => running!.fetch("/login?account=alice", { method: "POST" }));
    const bob = await running.fetch("/login?account=bob", { method: "POST" });

    expect(statusCounts(answers)).toEqual({ 200: 5, 429: 35 });
    expect(answers.filter((a) => a.status === 200).map((a) => (JSON.parse(a.body) as { remaining: number }).remaining).sort()).toEqual([0, 1, 2, 3, 4]);
    expect(answers.filter((a) => a.status === 429).every((a) => Number(a.headers.get("retry-after")) >= 1)).toBe(true);
    expect(bob.status).toBe(200);
  });

  it("check: applies the matching rule exactly (5 of 40), answers floodgate's 429 for the rest, and never contacts the origin, which the proxy does reach", async () => {
    const { config, built } = await example("service-binding");
    running = await run([workerOptions(config, built.path), await floodgateFor("service-binding")]);

    const answers = await concurrently(40, (i) => running!.fetch(`/api/sb-check/${i}`, { headers: { "x-api-key": "k-check" } }));
    // The control: the same floodgate Worker proxies its own traffic to this origin, so a count of 0 above means something.
    const proxied = await running.fetchWorker("floodgate", "/api/sb-check/direct", { headers: { "x-api-key": "k-direct" } });

    expect(statusCounts(answers)).toEqual({ 200: 5, 429: 35 });
    for (const answer of answers.filter((a) => a.status === 200)) {
      expect(JSON.parse(answer.body)).toEqual({ hello: expect.stringMatching(/^\/api\/sb-check\/\d+$/) });
      expect(answer.headers.get("ratelimit-policy")).toBe('"api";q=5;w=60');
    }
    for (const answer of answers.filter((a) => a.status === 429)) expectFloodgateDenial(answer, "api", '"api";q=5;w=60');
    expect(proxied.status).toBe(200);
    expect(proxied.headers.get("x-origin")).toBe("yes");
    expect(await originCount(originUrl(), "sb-check")).toBe(1);
  });
});

describe("examples/cloudflare-binding", () => {
  it("differs from its Cloudflare-binding original only in the LIMITER binding, and shows the original block in a comment", async () => {
    const [after, before, toml, original] = await Promise.all([
      readWorkerConfig(join(EXAMPLES, "cloudflare-binding/wrangler.toml")),
      readWorkerConfig(join(EXAMPLES, "cloudflare-binding/wrangler.cloudflare.toml")),
      readFile(join(EXAMPLES, "cloudflare-binding/wrangler.toml"), "utf8"),
      readFile(join(EXAMPLES, "cloudflare-binding/wrangler.cloudflare.toml"), "utf8"),
    ]);

    const rest = ({ services, ratelimits, path, ...others }: typeof after) => others;
    expect(rest(after)).toEqual(rest(before));
    expect(before.services).toEqual([]);
    expect(before.ratelimits).toEqual([{ name: "LIMITER", namespaceId: "1001", limit: 5, period: 60 }]);
    expect(after.ratelimits).toEqual([]);
    expect(after.services).toEqual([{ binding: "LIMITER", service: "floodgate", entrypoint: "Floodgate", props: { rule: "per-user" } }]);
    const block = original.slice(original.indexOf("[[ratelimits]]")).trim().split("\n");
    for (const line of block) expect(toml).toContain(`# ${line}`);
  });

  it("runs the same source against floodgate (a service binding) and against Cloudflare's binding (Miniflare's emulation): 5 of 40 concurrent calls per key on both", async () => {
    const floodgate = await example("cloudflare-binding");
    const cloudflare = await example("cloudflare-binding", "wrangler.cloudflare.toml");
    // One source, built twice: the two bundles are the same bytes.
    expect(await readFile(cloudflare.built.path, "utf8")).toBe(await readFile(floodgate.built.path, "utf8"));

    const outcomes: Record<string, { alice: Record<number, number>; bob: number; denial: string | undefined }> = {};
    for (const [label, { config, built }] of Object.entries({ floodgate, cloudflare })) {
      running = await run([workerOptions(config, built.path), ...(config.services.length > 0 ? [await floodgateFor("cloudflare-binding")] : [])]);
      if (label === "cloudflare") await clearOfMinuteEdge(); // Cloudflare's (emulated) window is the epoch-aligned minute
      const answers = await concurrently(40, () => running!.fetch("/?user=alice"));
      const bob = await running.fetch("/?user=bob");
      outcomes[label] = { alice: statusCounts(answers), bob: bob.status, denial: answers.find((a) => a.status === 429)?.body };
      expect(answers.filter((a) => a.status === 200).every((a) => a.body === "Success!")).toBe(true);
      await running.dispose();
      running = undefined;
    }

    const expected = { alice: { 200: 5, 429: 35 }, bob: 200, denial: "429 Failure: rate limit exceeded for alice" };
    expect(outcomes).toEqual({ floodgate: expected, cloudflare: expected });
  });
});

/** Waits, when the clock is within 3 s of a minute's end, until that minute is over. */
async function clearOfMinuteEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 3_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
