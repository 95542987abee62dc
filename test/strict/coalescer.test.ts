// The coalescer against the real RateLimiter: each object call is made by a request waiting in its batch, so no request's invocation carries a hot key's whole stream.
import { env } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import type { Decided } from "../../src/durable-object/rate-limiter";
import { policyOf } from "../../src/config/policy";
import type { Env } from "../../src/env";
import { decideStrict } from "../../src/strict";
import { Coalescer, type BatchCall } from "../../src/strict/coalescer";
import { rule } from "../helpers/rules";

const policy: Policy = { algorithm: "fixed-window", limit: 50, periodMs: 60_000, burst: 50, buckets: 1 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `count` requests for one key, one every millisecond, each with its own invocation: its own
 * waitUntil, and its own call to the object (a stub is made per request, as decideStrict makes
 * one). Each object call takes 5 ms more than it would, so later requests arrive while one is in
 * flight and the key stays hot. Returns each request's decision and how many calls each made.
 */
async function steadyStream(name: string, count: number): Promise<{ decided: Decided[]; callsBy: number[] }> {
  const coalescer = new Coalescer();
  const stub = env.LIMITER.get(env.LIMITER.idFromName(name));
  const callsBy = Array.from({ length: count }, () => 0);
  const background: Promise<unknown>[] = [];
  const decisions: Promise<Decided>[] = [];
  for (let i = 0; i < count; i++) {
    const call: BatchCall = async (_name, batchPolicy, costs) => {
      callsBy[i]!++;
      await sleep(5);
      return stub.decide(batchPolicy, costs);
    };
    decisions.push(coalescer.decide(call, name, policy, 1, { timeoutMs: 5_000, waitUntil: (promise) => background.push(promise) }));
    await sleep(1);
  }
  const decided = await Promise.all(decisions);
  await Promise.all(background);
  return { decided, callsBy };
}

describe("Coalescer", () => {
  it("makes no more than one object call under any one request's invocation while a key stays hot", async () => {
    const { callsBy } = await steadyStream("coalescer/steady", 100);
    expect(Math.max(...callsBy)).toBe(1);
  });

  it("still batches a hot key's requests, and decides exactly", async () => {
    const { decided, callsBy } = await steadyStream("coalescer/exact", 100);
    expect(decided.filter((d) => d.decision.allowed)).toHaveLength(50);
    expect(callsBy.reduce((a, b) => a + b, 0)).toBeLessThan(50);
  });
});

describe("strict decisions through two namespaces of the class", () => {
  it("decides each request at its own namespace's object, though both objects have one name", async () => {
    const name = "coalescer/two-namespaces";
    const fixed = rule({ name: "coalescer", algorithm: "fixed-window", limit: 10, periodMs: 3_600_000, burst: 10, timeoutMs: 5_000 });
    const other = env.FLAKY as unknown as Env["LIMITER"];
    const background: Promise<unknown>[] = [];
    const waitUntil = (promise: Promise<unknown>) => void background.push(promise);
    // The first is sent alone; the second (the other namespace's) and the third queue behind it, and the third sends their batch.
    await Promise.all([decideStrict(env.LIMITER, name, fixed, 1, waitUntil), decideStrict(other, name, fixed, 1, waitUntil), decideStrict(env.LIMITER, name, fixed, 1, waitUntil)]);
    await Promise.all(background);
    const remaining = async (namespace: Env["LIMITER"]) => (await namespace.get(namespace.idFromName(name)).peek(policyOf(fixed))).remaining;
    expect(await remaining(env.LIMITER)).toBe(8);
    expect(await remaining(other)).toBe(9);
  });

  it("denies from one namespace's remembered denial only that namespace's requests", async () => {
    const name = "coalescer/two-namespaces-denied";
    const one = rule({ name: "coalescer-denied", algorithm: "fixed-window", limit: 1, periodMs: 3_600_000, burst: 1, timeoutMs: 5_000 });
    const other = env.FLAKY as unknown as Env["LIMITER"];
    await decideStrict(env.LIMITER, name, one, 1, undefined);
    expect((await decideStrict(env.LIMITER, name, one, 1, undefined)).decision.allowed).toBe(false);
    // The other namespace's object of that name has counted nothing: its first request is admitted.
    expect((await decideStrict(other, name, one, 1, undefined)).decision.allowed).toBe(true);
  });

  it("keeps one namespace's failing object from opening the breaker of the other's object of that name", async () => {
    const name = "coalescer-failing/two-namespaces";
    const fixed = rule({ name: "coalescer-failing", algorithm: "fixed-window", limit: 10, periodMs: 3_600_000, burst: 10, timeoutMs: 5_000 });
    const flaky = env.FLAKY as unknown as Env["LIMITER"];
    await env.FLAKY.get(env.FLAKY.idFromName(name)).fail(2, "before");
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    try {
      for (let i = 0; i < 2; i++) await expect(decideStrict(flaky, name, fixed, 1, undefined)).rejects.toThrow();
    } finally {
      vi.restoreAllMocks();
    }
    expect((await decideStrict(env.LIMITER, name, fixed, 1, undefined)).decision.allowed).toBe(true);
    // The breaker's line names the rule, as it did when breakers were keyed by name.
    expect(lines).toContainEqual(expect.objectContaining({ event: "breaker", scope: "key", rule: "coalescer-failing", state: "open" }));
  });

  it("keeps one namespace's failing objects from opening the rule's breaker for the other's objects", async () => {
    const fixed = rule({ name: "coalescer-failing-rule", algorithm: "fixed-window", limit: 10, periodMs: 3_600_000, burst: 10, timeoutMs: 5_000 });
    const flaky = env.FLAKY as unknown as Env["LIMITER"];
    const keys = ["a", "b", "c", "d"].map((k) => `coalescer-failing-rule/${k}`);
    for (const name of keys) await env.FLAKY.get(env.FLAKY.idFromName(name)).fail(1, "before");
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      for (const name of keys) await expect(decideStrict(flaky, name, fixed, 1, undefined)).rejects.toThrow(/injected/);
      await expect(decideStrict(flaky, "coalescer-failing-rule/e", fixed, 1, undefined)).rejects.toThrow(/unavailable/);
    } finally {
      vi.restoreAllMocks();
    }
    expect((await decideStrict(env.LIMITER, "coalescer-failing-rule/e", fixed, 1, undefined)).decision.allowed).toBe(true);
  });
});
