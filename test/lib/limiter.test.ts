// The library from inside a Worker: limiter() for one rule and createGate() for a rule set, with the real RateLimiter object.
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { ConfigError, createGate, limiter, type LimiterRule, type RuleInput } from "../../src/lib";
import { relayName } from "../../src/fast/relay";
import { metrics } from "../../src/metrics/metrics";
import { durableObjectName } from "../../src/routing/key";
import { isRelay, originLog } from "../helpers/worker";
import { frozenStart } from "../helpers/clock";
import { delayedSyncs, heldCalls } from "../helpers/namespace";

const namespace = (env as unknown as Env).LIMITER;
const calls = (method: string) => metrics.value("floodgate_durable_object_calls_total", { method });

describe("limiter", () => {
  it("throws at construction with the proxy parser's message naming the field", () => {
    expect(() => limiter(namespace, { name: "lib-bad", limit: 10, period: "ten" } as never)).toThrow(/^rule \("lib-bad"\)\.period: expected a duration like "10s"/);
    expect(() => limiter(namespace, { name: "lib-bad", limit: 0, period: "1m" })).toThrow(/^rule \("lib-bad"\)\.limit: expected a positive integer/);
  });

  it("lists only the fields a rule used from code may have when one is unknown", () => {
    expect(() => limiter(namespace, { name: "lib-u", limit: 1, period: "1m", limt: 2 } as never)).toThrow(/^rule \("lib-u"\)\.limt: unknown field; allowed fields here are name, algorithm, limit,/);
    expect(() => limiter(namespace, { name: "lib-u", limit: 1, period: "1m", limt: 2 } as never)).not.toThrow(/\b(match|key|ipv6Prefix|overrides)\b/);
    // limit sees no response and answers no denial itself: listed, they would be refused next.
    expect(() => limiter(namespace, { name: "lib-u", limit: 1, period: "1m", limt: 2 } as never)).not.toThrow(/\b(responseCost|denyResponse)\b/);
  });

  it("throws at construction when the namespace is not one (a mistyped binding)", () => {
    expect(() => limiter(undefined as never, { name: "lib-ns", limit: 1, period: "1m" })).toThrow(/limiter: the first argument must be the RateLimiter Durable Object namespace/);
    expect(() => createGate({} as never, [])).toThrow(/createGate: the first argument must be/);
  });

  it("throws at construction for a service binding, which answers to idFromName as to any method name", () => {
    expect(() => limiter(SELF as never, { name: "lib-ns", limit: 1, period: "1m" })).toThrow(/limiter: the first argument must be the RateLimiter Durable Object namespace .*got \[object \w+\]/);
  });

  it("rejects match, key, ipv6Prefix and a header cost, which have no meaning for a rule used from code", () => {
    expect(() => limiter(namespace, { name: "lib-x", limit: 1, period: "1m", key: "ip" } as never)).toThrow(/rule \("lib-x"\)\.key: has no meaning/);
    expect(() => limiter(namespace, { name: "lib-x", limit: 1, period: "1m", match: { path: "/x" } } as never)).toThrow(/rule \("lib-x"\)\.match: has no meaning/);
    expect(() => limiter(namespace, { name: "lib-x", limit: 1, period: "1m", ipv6Prefix: 48 } as never)).toThrow(/rule \("lib-x"\)\.ipv6Prefix: has no meaning/);
    expect(() => limiter(namespace, { name: "lib-x", limit: 1, period: "1m", cost: "header:x-cost" } as never)).toThrow(/rule \("lib-x"\)\.cost: a header cost needs a request/);
  });

  it("grants exactly the limit to concurrent calls and reports a LimitResult", async () => {
    const api = limiter(namespace, { name: "lib-exact", limit: 5, period: "1h" });
    const ctx = createExecutionContext();
    const results = await Promise.all(Array.from({ length: 20 }, () => api.limit("user-1", { ctx })));
    await waitOnExecutionContext(ctx);

    expect(results.filter((r) => r.success)).toHaveLength(5);
    const denied = results.find((r) => !r.success)!;
    expect(denied).toMatchObject({ success: false, limit: 5, remaining: 0, rule: "lib-exact", reason: "limit" });
    expect(denied.retryAfter).toBeGreaterThan(0);
    expect(denied.reset).toBeGreaterThan(Date.now());
  });

  it("decides without a ctx on a strict rule, one call each", async () => {
    const api = limiter(namespace, { name: "lib-noctx", limit: 2, period: "1h" });
    const results = await Promise.all([api.limit("k"), api.limit("k"), api.limit("k")]);
    expect(results.map((r) => r.success).sort()).toEqual([false, true, true]);
  });

  it("takes the rule's constant cost by default, and a cost per call", async () => {
    const api = limiter(namespace, { name: "lib-cost", limit: 10, period: "1h", cost: 4 });
    expect((await api.limit("k")).remaining).toBe(6);
    expect((await api.limit("k", { cost: 6 })).remaining).toBe(0);
  });

  it("denies a fast key's blocked request as blocked when its object cannot be asked when that cost passes, not by onError", async () => {
    let down = false;
    const failing = delayedSyncs(async () => {
      if (down) throw new Error("object down");
    });
    const api = limiter(failing, { name: "lib-block-down", mode: "fast", algorithm: "fixed-window", limit: 10, period: "1h", block: "10m", onError: "allow" });
    const ctx = createExecutionContext();
    expect((await api.limit("k", { ctx, cost: 9 })).success).toBe(true);
    expect(await api.limit("k", { ctx, cost: 2 })).toMatchObject({ success: false, reason: "blocked" });
    down = true;
    // A cost it was not told of: the isolate would ask the object when it passes.
    expect(await api.limit("k", { ctx, cost: 5 })).toMatchObject({ success: false, reason: "blocked" });
    await waitOnExecutionContext(ctx);
    // Back up: a later request's sweep gives the key's idle lease back to this object, once, not to a failing one again and again.
    down = false;
  });

  it("peeks without consuming, and resets", async () => {
    const api = limiter(namespace, { name: "lib-peek", limit: 3, period: "1h" });
    await api.limit("k");
    expect((await api.peek("k")).remaining).toBe(2);
    expect((await api.peek("k")).remaining).toBe(2);
    await api.reset("k");
    expect((await api.peek("k")).remaining).toBe(3);
  });

  it("rejects a peek the key's object does not answer within the rule's timeout, rather than wait on it", async () => {
    let answered: Promise<unknown> | undefined;
    // The real objects, each peek answered only after the checks below: an object far behind on its queue.
    const slowPeeks = heldCalls("peek", (answer) => void (answered = answer));
    const api = limiter(slowPeeks.namespace, { name: "lib-peek-slow", limit: 3, period: "1h", timeout: "100ms" });
    const started = Date.now();
    await expect(api.peek("k")).rejects.toThrow(/^no answer within 100ms$/);
    expect(Date.now() - started).toBeLessThan(1_500);
    slowPeeks.answer();
    await answered;
  });

  it("rejects a reset the key's object does not take within the rule's timeout, rather than wait on it", async () => {
    let answered: Promise<unknown> | undefined;
    const slowResets = heldCalls("reset", (answer) => void (answered = answer));
    const api = limiter(slowResets.namespace, { name: "lib-reset-slow", limit: 3, period: "1h", timeout: "100ms" });
    const started = Date.now();
    await expect(api.reset("k")).rejects.toThrow(/^no answer within 100ms$/);
    expect(Date.now() - started).toBeLessThan(1_500);
    slowResets.answer();
    await answered;
  });

  it("peeks a key new to this isolate past newKeysPerSecond as its request would be counted: under #overflow", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(frozenStart());
    const api = limiter(namespace, { name: "lib-peek-new", limit: 1, period: "1h", newKeysPerSecond: 1 });
    const limited = [await api.limit("n0"), await api.limit("n1"), await api.limit("n2")].map((r) => r.success);
    const peeked = await api.peek("n3");
    const limitedAfter = await api.limit("n3");
    vi.useRealTimers();
    expect(limited).toEqual([true, true, false]);
    expect(peeked.success).toBe(false);
    expect(limitedAfter.success).toBe(false);
  });

  it("throws for a missing or empty key and a bad cost, consuming nothing", async () => {
    const api = limiter(namespace, { name: "lib-args", limit: 3, period: "1h" });
    await expect(api.limit("")).rejects.toThrow(/limiter\("lib-args"\)\.limit: key must be a non-empty string/);
    await expect(api.limit(undefined as unknown as string)).rejects.toThrow(/key must be a non-empty string/);
    await expect(api.limit("k", { cost: 2 ** 60 })).rejects.toThrow(/cost must be a positive integer of at most 2\^53 - 1/);
    await expect(api.limit({} as unknown as string)).rejects.toThrow(/got an object/);
    await expect(api.limit("k", { cost: 0 })).rejects.toThrow(/cost must be a positive integer, got 0/);
    await expect(api.limit("k", { cost: 2.5 })).rejects.toThrow(/cost must be a positive integer, got 2\.5/);
    await expect(api.limit("k", { location: "" })).rejects.toThrow(/location must be a Cloudflare location code like "AMS" \(request\.cf\.colo\), 1 to 8 letters or digits, got ""/);
    await expect(api.limit("k", { location: "203.0.113.7" })).rejects.toThrow(/location must be a Cloudflare location code/);
    await expect(api.limit("k", { continent: "Europe" })).rejects.toThrow(/continent must be a Cloudflare continent code like "EU" \(request\.cf\.continent\), 2 letters or digits, got "Europe"/);
    expect((await api.peek("k")).remaining).toBe(3);
  });

  it("throws for a ctx that is no ExecutionContext and a signal that is no AbortSignal, rather than fail every call as an outage", async () => {
    const api = limiter(namespace, { name: "lib-ctx", limit: 3, period: "1h" });
    await expect(api.limit("k", { ctx: {} as never })).rejects.toThrow(/^limiter\("lib-ctx"\)\.limit: ctx must be the request's ExecutionContext \(in Hono, c\.executionCtx\), with a waitUntil method; got an object$/);
    await expect(api.limit("k", { signal: "x" as never })).rejects.toThrow(/signal must be an AbortSignal \(request\.signal\), got "x"/);
    expect((await api.peek("k")).remaining).toBe(3);
  });

  it("rejects a call whose signal is already aborted, consuming nothing", async () => {
    const api = limiter(namespace, { name: "lib-aborted", limit: 3, period: "1h" });
    await expect(api.limit("k", { signal: AbortSignal.abort(new Error("gone")) })).rejects.toThrow(/^gone$/);
    expect((await api.peek("k")).remaining).toBe(3);
  });

  it("throws for arguments past those a call takes: peek and reset take a key only", async () => {
    const api = limiter(namespace, { name: "lib-extra", limit: 3, period: "1h" });
    await expect((api.peek as (...a: unknown[]) => Promise<unknown>)("k", { cost: 2 })).rejects.toThrow(/^limiter\("lib-extra"\)\.peek: takes a key, got 2 arguments$/);
    await expect((api.reset as (...a: unknown[]) => Promise<unknown>)("k", "other")).rejects.toThrow(/reset: takes a key, got 2 arguments/);
    await expect((api.limit as (...a: unknown[]) => Promise<unknown>)("k", {}, { cost: 2 })).rejects.toThrow(/limit: takes a key and options, got 3 arguments/);
    expect(((await (api.peek as (...a: unknown[]) => Promise<{ remaining: number }>)("k", undefined)).remaining)).toBe(3);
  });

  it("throws for an option limit does not know, rather than take the default it would have replaced", async () => {
    const api = limiter(namespace, { name: "lib-options", limit: 3, period: "1h" });
    await expect(api.limit("k", { cots: 3 } as never)).rejects.toThrow(/^limiter\("lib-options"\)\.limit: unknown option "cots"; the options are cost\?, ctx\?, location\?, continent\?, signal\?$/);
    expect((await api.peek("k")).remaining).toBe(3);
  });

  it("throws for an option createGate does not know, as rateLimit does", () => {
    expect(() => createGate(namespace, [], { legacyheaders: false } as never)).toThrow(/^createGate: unknown option "legacyheaders"; the options are headers\?, legacyHeaders\?, allowIps\?, denyIps\?$/);
  });

  it("shares a key past 1 KB with the proxy's traffic under it, both naming it by its hash", async () => {
    const long = "é".repeat(600);
    const gate = createGate(namespace, [{ name: "lib-long", key: "header:x-long", limit: 3, period: "1h" }]);
    const ctx = createExecutionContext();
    expect((await gate.check(new Request("http://app.test/x", { headers: { "x-long": long } }), ctx)).allowed).toBe(true);
    await waitOnExecutionContext(ctx);
    const api = limiter(namespace, { name: "lib-long", limit: 3, period: "1h" });
    expect((await api.limit(long)).remaining).toBe(1);
    expect(await durableObjectName("lib-long", long)).toMatch(/^lib-long\/#sha256:[0-9a-f]{64}$/);
  });

  it.each(["strict", "fast"] as const)("admits a key its %s rule denied once code asks under the same name with a raised limit (a plan upgraded)", async (mode) => {
    const ctx = createExecutionContext();
    const [free, pro] = [3, 10].map((limit) => limiter(namespace, { name: `lib-upgrade-${mode}`, limit, period: "1h", mode }));
    for (let i = 0; i < 3; i++) expect((await free!.limit("k", { ctx })).success).toBe(true);
    expect(await free!.limit("k", { ctx })).toMatchObject({ success: false, limit: 3 });

    expect(await pro!.limit("k", { ctx })).toMatchObject({ success: true, limit: 10 });
    await waitOnExecutionContext(ctx);
  });

  it("denies a key under its old, stricter figures once a raised limit of the same name admitted it, strict", async () => {
    const [free, pro] = [3, 10].map((limit) => limiter(namespace, { name: "lib-downgrade", limit, period: "1h" }));
    for (let i = 0; i < 4; i++) await free!.limit("k");
    expect(await pro!.limit("k")).toMatchObject({ success: true, limit: 10 });
    expect(await free!.limit("k")).toMatchObject({ success: false, limit: 3 });
    expect(await free!.limit("k")).toMatchObject({ success: false, limit: 3, reason: "cache" });
  });

  it("tells a stricter plan's request denied from a looser plan's cached denial its own limit", async () => {
    const [free, pro] = [2, 3].map((limit) => limiter(namespace, { name: "lib-cached-plan", limit, period: "1h" }));
    for (let i = 0; i < 4; i++) await pro!.limit("k");
    expect(await free!.limit("k")).toMatchObject({ success: false, limit: 2, reason: "cache" });
  });

  it("keeps denying from its cache when plans alternate on a denied fast key, asking the object once per raise", async () => {
    const ctx = createExecutionContext();
    const [free, pro] = [2, 4].map((limit) => limiter(namespace, { name: "lib-alternate", limit, period: "1h", mode: "fast" }));
    for (let i = 0; i < 6; i++) await pro!.limit("k", { ctx });
    await free!.limit("k", { ctx });
    await waitOnExecutionContext(ctx);
    const before = metrics.value("floodgate_durable_object_calls_total", { method: "sync" });
    for (let i = 0; i < 10; i++) expect(await (i % 2 ? pro! : free!).limit("k", { ctx })).toMatchObject({ success: false });
    expect(metrics.value("floodgate_durable_object_calls_total", { method: "sync" }) - before).toBeLessThanOrEqual(1);
    await waitOnExecutionContext(ctx);
  });

  it("refuses a concurrency rule and a rate rule under one name: a key's object cannot count slots and units at once", () => {
    limiter(namespace, { name: "lib-one-kind", algorithm: "concurrency", limit: 2 });
    expect(() => limiter(namespace, { name: "lib-one-kind", limit: 5, period: "1m" })).toThrow(/^limiter: a concurrency rule and a rate rule are both named "lib-one-kind"/);
    expect(() => limiter(namespace, { name: "lib-one-kind", algorithm: "concurrency", limit: 3 })).not.toThrow();
  });

  it("says what came instead of the namespace when it is missing", () => {
    expect(() => limiter(undefined as never, { name: "lib-no-ns", limit: 1, period: "1m" })).toThrow(/got undefined$/);
  });

  it("keeps a key written as a long key's #sha256 name off that long key's counter: code passes keys as given", async () => {
    const api = limiter(namespace, { name: "lib-hashed", limit: 10, period: "1h" });
    const long = "q".repeat(2000);
    const named = (await durableObjectName("lib-hashed", long)).slice("lib-hashed/".length);
    await api.limit(named, { cost: 7 });
    expect((await api.peek(long)).remaining).toBe(10);
    expect((await api.peek(named)).remaining).toBe(3);
  });

  it("never denies under a dry-run rule: a would-be denial is a success with reason dry-run, consuming nothing", async () => {
    const api = limiter(namespace, { name: "lib-dry", limit: 1, period: "1h", dryRun: true });
    expect((await api.limit("k")).success).toBe(true);
    expect(await api.limit("k")).toMatchObject({ success: true, remaining: 0, retryAfter: 0, reason: "dry-run" });
    expect(await api.peek("k")).toMatchObject({ success: true, reason: "dry-run" });
  });

  it("syncs a rule with aggregate: location through the relay of the location a call passes, and straight without one", async () => {
    const api = limiter(namespace, { name: "lib-relayed", limit: 100, period: "1h", mode: "fast", aggregate: "location" });
    const ctx = createExecutionContext();
    const [relayBefore, syncBefore] = [calls("relay"), calls("sync")];
    expect((await api.limit("here", { ctx, location: "AMS" })).success).toBe(true);
    expect(calls("relay")).toBe(relayBefore + 1);
    expect((await api.limit("elsewhere", { ctx })).success).toBe(true);
    expect(calls("sync")).toBe(syncBefore + 1);
    await waitOnExecutionContext(ctx);
  });

  it("syncs a rule with aggregate: continent through the relay of the continent a call passes, not of its location", async () => {
    const api = limiter(namespace, { name: "lib-continent", limit: 100, period: "1h", mode: "fast", aggregate: "continent" });
    const ctx = createExecutionContext();
    const relayBefore = calls("relay");
    expect((await api.limit("here", { ctx, location: "AMS", continent: "EU" })).success).toBe(true);
    await waitOnExecutionContext(ctx);
    expect(calls("relay")).toBe(relayBefore + 1);
    const name = await durableObjectName("lib-continent", "here");
    expect(await isRelay(relayName("EU", name))).toBe(true);
    expect(await isRelay(relayName("AMS", name))).toBe(false);
  });

  it("asks for the ExecutionContext on a fast rule instead of deciding without background syncs", async () => {
    const api = limiter(namespace, { name: "lib-fast", limit: 3, period: "1h", mode: "fast" });
    await expect(api.limit("k")).rejects.toThrow(/a fast rule needs \{ ctx \}/);
    const ctx = createExecutionContext();
    const results = await Promise.all(Array.from({ length: 5 }, () => api.limit("k", { ctx })));
    await waitOnExecutionContext(ctx);
    expect(results.filter((r) => r.success)).toHaveLength(3);
  });

  it("grants a fast key its whole limit in a burst through limiters made per request, as the README's handlers make them", async () => {
    const rule: LimiterRule = { name: "lib-fast-per-request", limit: 100, period: "1h", mode: "fast" };
    // Each its own request: its own ExecutionContext, arriving while the others' syncs are on their way.
    const one = async (i: number) => {
      await new Promise((resolve) => setTimeout(resolve, i % 30));
      const ctx = createExecutionContext();
      const result = await limiter(namespace, rule).limit("burst", { ctx });
      await waitOnExecutionContext(ctx);
      return result;
    };
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => one(i)));
    expect(results.filter((r) => r.success)).toHaveLength(100);
  });

  it("admits a fast token bucket's caller that waits out the retryAfter its burst was told, at an idle key", async () => {
    // 10 every 4 s: the burst's ten, reported a second on, must not count as taken then, from full.
    const api = limiter(namespace, { name: "lib-fast-bucket-retry", algorithm: "token-bucket", limit: 10, period: "4s", mode: "fast" });
    const burst = await Promise.all(Array.from({ length: 30 }, () => api.limit("k", { ctx: createExecutionContext() })));
    const denied = burst.find((r) => !r.success)!;
    await new Promise((resolve) => setTimeout(resolve, denied.retryAfter));
    expect(await api.limit("k", { ctx: createExecutionContext() })).toMatchObject({ success: true });
  });

  it("peeks a fast key as a one-unit limit would find it now: this isolate's denial while it denies", async () => {
    const api = limiter(namespace, { name: "lib-fast-peek", limit: 3, period: "1h", mode: "fast" });
    const ctx = createExecutionContext();
    for (let i = 0; i < 4; i++) await api.limit("k", { ctx });
    await waitOnExecutionContext(ctx);
    // The object forgets the key, as another isolate's reset would; this isolate still denies it until its denial ends.
    await namespace.get(namespace.idFromName(await durableObjectName("lib-fast-peek", "k"))).reset();
    const [peeked, limited] = [await api.peek("k"), await api.limit("k", { ctx: createExecutionContext() })];
    expect(limited.success).toBe(false);
    expect(peeked.success).toBe(false);
    // Read a moment apart: the same denial, counted down.
    expect(Math.abs(peeked.retryAfter - limited.retryAfter)).toBeLessThan(1_000);
  });

  it("rejects a fast key's peek within one rule timeout, though both its sync and the object's standing are slow", async () => {
    const landing: Promise<unknown>[] = [];
    const slow = heldCalls(["sync", "peek"], (answer) => void landing.push(answer.catch(() => undefined)));
    const api = limiter(slow.namespace, { name: "lib-fast-peek-slow", limit: 5, period: "1h", mode: "fast", timeout: "500ms", onError: "allow" });
    const ctx = createExecutionContext();
    expect(await api.limit("k", { ctx })).toMatchObject({ success: true, reason: "error" });
    const started = Date.now();
    await expect(api.peek("k")).rejects.toThrow(/^no answer within/);
    const took = Date.now() - started;
    slow.answer();
    await Promise.all(landing);
    await waitOnExecutionContext(ctx);
    expect(took).toBeLessThan(850);
  });

  it("peeks a fast key as admitted while this isolate's lease holds a unit, though the object counts it taken", async () => {
    const api = limiter(namespace, { name: "lib-fast-peek-lease", limit: 2, period: "1h", mode: "fast" });
    const ctx = createExecutionContext();
    expect((await api.limit("k", { ctx })).success).toBe(true);
    await waitOnExecutionContext(ctx);
    const peeked = await api.peek("k");
    expect(peeked).toMatchObject({ success: true, retryAfter: 0 });
    expect((await api.limit("k", { ctx: createExecutionContext() })).success).toBe(true);
  });

  it("peeks a fast fixed-window key as admitted in a new window, though this isolate's ended lease from the last one is unreported", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0 + 20_000);
    const api = limiter(namespace, { name: "lib-fast-peek-fw", algorithm: "fixed-window", limit: 5, period: "30s", mode: "fast" });
    const ctx = createExecutionContext();
    expect((await api.limit("k", { ctx, cost: 2 })).success).toBe(true);
    await waitOnExecutionContext(ctx);
    vi.setSystemTime(t0 + 30_700);
    const peeked = await api.peek("k");
    const limited = await api.limit("k", { ctx: createExecutionContext() });
    vi.useRealTimers();
    expect(limited).toMatchObject({ success: true, remaining: 4 });
    expect(peeked).toMatchObject({ success: true, retryAfter: 0 });
  });

  it("tells a fast token bucket's costlier call, denied by its object, when a call of its cost passes", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart();
    vi.setSystemTime(t0);
    const api = limiter(namespace, { name: "lib-fast-costlier", algorithm: "token-bucket", limit: 10, period: "1m", mode: "fast" });
    const ctx = createExecutionContext();
    expect((await api.limit("k", { ctx, cost: 10 })).success).toBe(true);
    await waitOnExecutionContext(ctx);
    const denied = await api.limit("k", { ctx: createExecutionContext(), cost: 5 });
    vi.setSystemTime(t0 + denied.retryAfter);
    const again = await api.limit("k", { ctx: createExecutionContext(), cost: 5 });
    vi.useRealTimers();
    expect(denied).toMatchObject({ success: false });
    expect(denied.retryAfter).toBeGreaterThanOrEqual(30_000);
    expect(again.success).toBe(true);
  });

  it("tells a fast token bucket's caller denied after a burst a wait after which it passes: the burst is counted from the end of its tick", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = frozenStart() + 7_000;
    vi.setSystemTime(t0);
    const api = limiter(namespace, { name: "lib-fast-tick", algorithm: "token-bucket", limit: 10, period: "1m", mode: "fast" });
    const burst = await Promise.all(Array.from({ length: 11 }, () => api.limit("k", { ctx: createExecutionContext() })));
    const denied = burst.find((r) => !r.success)!;
    vi.setSystemTime(t0 + denied.retryAfter);
    const again = await api.limit("k", { ctx: createExecutionContext() });
    vi.useRealTimers();
    expect(again.success).toBe(true);
  });

  // A crowd at a fresh key of 10 a period: its isolate spends the whole lease at once and calls no
  // more until the client comes back, by when (past the lease's end and the report grace) the object
  // has counted the unreported units at the lease's end, not when they went.
  for (const [algorithm, period] of [["token-bucket", "1m"], ["sliding-window", "1m"], ["fixed-window", "1m"], ["sliding-log", "1m"], ["token-bucket", "10m"], ["sliding-log", "10m"]] as const) {
    it(`tells a fast ${algorithm} of 10 per ${period}'s crowd a wait after which a retry passes`, async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const t0 = frozenStart() + 7_000;
      vi.setSystemTime(t0);
      const api = limiter(namespace, { name: `lib-crowd-${algorithm}-${period}`, algorithm, limit: 10, period, mode: "fast" });
      const crowd = await Promise.all(Array.from({ length: 30 }, () => api.limit("k", { ctx: createExecutionContext() })));
      const told = Math.min(...crowd.filter((r) => !r.success).map((r) => r.retryAfter));
      vi.setSystemTime(t0 + told);
      const again = await api.limit("k", { ctx: createExecutionContext() });
      vi.useRealTimers();
      expect(crowd.filter((r) => r.success)).toHaveLength(10);
      expect(again).toMatchObject({ success: true, retryAfter: 0 });
    });
  }

  it("denies a cost beyond a fast rule's capacity with that reason and a period's wait, consuming nothing", async () => {
    const window = limiter(namespace, { name: "lib-fast-cap", limit: 5, period: "1m", mode: "fast" });
    const bucket = limiter(namespace, { name: "lib-fast-cap-tb", algorithm: "token-bucket", limit: 5, period: "1m", burst: 8, mode: "fast" });
    const ctx = createExecutionContext();
    const before = calls("sync") + calls("relay");
    const fresh = [await window.limit("new", { cost: 6, ctx }), await bucket.limit("new", { cost: 9, ctx })];
    expect(calls("sync") + calls("relay")).toBe(before);
    expect(fresh.map((r) => [r.success, r.reason, r.retryAfter, r.remaining])).toEqual([
      [false, "cost-exceeds-capacity", 60_000, 5],
      [false, "cost-exceeds-capacity", 60_000, 8],
    ]);

    // A key this isolate tracks is answered from what it knows, with no call at all.
    expect((await window.limit("known", { cost: 2, ctx })).success).toBe(true);
    const peeks = calls("peek");
    const known = await window.limit("known", { cost: 6, ctx });
    await waitOnExecutionContext(ctx);
    expect(calls("peek")).toBe(peeks);
    expect(known).toMatchObject({ success: false, reason: "cost-exceeds-capacity", retryAfter: 60_000, remaining: 3 });
    expect((await bucket.limit("new", { cost: 8, ctx: createExecutionContext() })).success).toBe(true);
  });

  it("denies a cost beyond a strict rule's capacity with the key's own figures, read without a decision", async () => {
    const api = limiter(namespace, { name: "lib-strict-cap-used", algorithm: "token-bucket", limit: 2, period: "1m", burst: 4 });
    expect((await api.limit("k", { cost: 3 })).success).toBe(true);
    const [decides, peeks] = [calls("decide"), calls("peek")];
    const denied = await api.limit("k", { cost: 5 });
    expect([calls("decide") - decides, calls("peek") - peeks]).toEqual([0, 1]);
    expect(denied).toMatchObject({ success: false, reason: "cost-exceeds-capacity", retryAfter: 60_000, remaining: 1 });
    expect(denied.reset).toBeGreaterThan(Date.now() + 30_000);
  });

  it("says a blocked key is blocked, until the block ends, whatever the cost", async () => {
    const api = limiter(namespace, { name: "lib-strict-cap-block", limit: 1, period: "1m", block: "1h" });
    await api.limit("k");
    expect(await api.limit("k")).toMatchObject({ success: false, reason: "blocked" });
    const huge = await api.limit("k", { cost: 2 });
    expect(huge.success).toBe(false);
    expect(huge.retryAfter).toBeGreaterThan(3_500_000);
  });

  it("denies a cost beyond a strict rule's capacity with that reason while the key's denial is cached", async () => {
    const api = limiter(namespace, { name: "lib-strict-cap", limit: 2, period: "1m" });
    await api.limit("k", { cost: 2 });
    expect(await api.limit("k")).toMatchObject({ success: false, reason: "limit" });
    expect(await api.limit("k")).toMatchObject({ success: false, reason: "cache" });
    expect(await api.limit("k", { cost: 3 })).toMatchObject({ success: false, reason: "cost-exceeds-capacity", retryAfter: 60_000 });
  });
});

describe("limiter with a gcra delay", () => {
  // One unit every 200 ms, burst 1, delay 0: of two calls at once, the second is held 200 ms.
  const rule = (name: string): LimiterRule => ({ name, algorithm: "gcra", limit: 5, period: "1s", burst: 1, delay: 0 });

  it("resolves a call past the delay only once it conforms", async () => {
    const smooth = limiter(namespace, rule("lib-hold"));
    const started = Date.now();
    const settledAt = await Promise.all([0, 1].map(() => smooth.limit("k").then((r) => ({ success: r.success, after: Date.now() - started }))));
    expect(settledAt.map((s) => s.success)).toEqual([true, true]);
    // Timed from the start, not from the sooner call: load can only delay the sooner one's answer, which would shrink a gap.
    expect(Math.max(...settledAt.map((s) => s.after))).toBeGreaterThanOrEqual(190);
  });

  it("resolves a held call with the key's standing once it conforms, not at its admission", async () => {
    const smooth = limiter(namespace, rule("lib-hold-standing"));
    const [, held] = await Promise.all([smooth.limit("k"), new Promise((r) => setTimeout(r, 5)).then(() => smooth.limit("k"))]);
    // Admitted with both units of the burst taken (remaining 0); 200 ms later one of them is paid off.
    expect(held).toMatchObject({ success: true, remaining: 1, retryAfter: 0 });
  });

  it("rejects a held call whose signal aborts with the signal's reason, giving its unit back", async () => {
    const smooth = limiter(namespace, rule("lib-hold-abort"));
    await smooth.limit("k");
    const leaving = smooth.limit("k", { signal: AbortSignal.timeout(30) });
    await expect(leaving).rejects.toMatchObject({ name: "TimeoutError" });
    // Its unit back, the next call is held in its place rather than denied.
    expect((await smooth.limit("k")).success).toBe(true);
  });
});

describe("limiter with a rule that counts by response", () => {
  it("gives back what a success took once settled, so only failed attempts count", async () => {
    const attempts = limiter(namespace, { name: "lib-count", limit: 2, period: "1h", count: "failed" });
    const ctx = createExecutionContext();
    const outcomes = [];
    for (const succeeded of [true, true, true, false, false, true]) {
      const result = await attempts.limit("k-count", { ctx });
      outcomes.push(result.success);
      if (result.success) await result.settle!(succeeded);
    }
    await waitOnExecutionContext(ctx);

    expect(outcomes).toEqual([true, true, true, true, true, false]);
    expect((await attempts.peek("k-count")).remaining).toBe(0);
  });

  it("gives back only once however often settled, and keeps the units when never settled or settled with a failure", async () => {
    const attempts = limiter(namespace, { name: "lib-count-once", limit: 3, period: "1h", count: "failed" });
    const kept = await attempts.limit("k-once");
    await kept.settle!(401);
    await (await attempts.limit("k-once")).settle!.call(undefined, 500);
    const given = await attempts.limit("k-once");
    await Promise.all([given.settle!(200), given.settle!(204), given.settle!(true)]);
    expect((await attempts.peek("k-once")).remaining).toBe(1);
    await expect(given.settle!("ok" as never)).rejects.toThrow(/^settle: expected the response's HTTP status \(100 to 599\) or whether the request succeeded/);
  });

  it("has no settle for a rule that counts every request, nor for a denial", async () => {
    const plain = limiter(namespace, { name: "lib-count-all", limit: 1, period: "1h" });
    expect("settle" in (await plain.limit("k"))).toBe(false);
    const judged = limiter(namespace, { name: "lib-count-denied", limit: 1, period: "1h", count: "failed" });
    await judged.limit("k");
    expect("settle" in (await judged.limit("k"))).toBe(false);
  });
});

describe("createGate", () => {
  const rules: RuleInput[] = [{ name: "gate-ip", match: { path: "/gate-lib/*" }, key: "ip", limit: 2, period: "1h", cost: "header:x-cost" }];
  const request = (headers: Record<string, string> = {}) => new Request("http://app.test/gate-lib/x", { headers: { "CF-Connecting-IP": "192.0.2.200", ...headers } });

  it("throws at construction for an invalid rule set, naming the rule and field", () => {
    expect(() => createGate(namespace, [{ name: "g", limit: 1, period: "soon" }] as never)).toThrow(/^rules\[0\] \("g"\)\.period/);
  });

  it("applies the rules as the proxy does: headers when allowed, the 429 when not, never the origin", async () => {
    const gate = createGate(namespace, rules);
    const ctx = createExecutionContext();
    const first = await gate.check(request(), ctx);
    await gate.check(request(), ctx);
    const third = await gate.check(request(), ctx);
    await waitOnExecutionContext(ctx);

    expect(first.allowed).toBe(true);
    expect(first.response).toBeUndefined();
    expect(first.headers["RateLimit-Policy"]).toBe('"gate-ip";q=2;w=3600');
    expect(third.allowed).toBe(false);
    expect(third.response?.status).toBe(429);
    expect(third.response?.headers.get("Content-Type")).toBe("application/problem+json");
    expect(third.headers["Retry-After"]).toBeDefined();
    expect(await originLog("gate-lib")).toEqual([]);
  });

  it("answers a malformed cost header with the 400 the proxy sends, consuming nothing", async () => {
    const gate = createGate(namespace, rules);
    const checked = await gate.check(request({ "CF-Connecting-IP": "192.0.2.201", "x-cost": "abc" }), createExecutionContext());
    expect(checked.allowed).toBe(false);
    expect(checked.response?.status).toBe(400);
  });

  it("admits with settle when a rule counts by response, giving back what a success took once told the status", async () => {
    const gate = createGate(namespace, [{ name: "gate-count", match: { path: "/gate-count/*" }, key: "ip", limit: 1, period: "1h", count: "failed" }]);
    const attempt = () => gate.check(new Request("http://app.test/gate-count/login", { headers: { "CF-Connecting-IP": "192.0.2.205" } }), createExecutionContext());
    const first = await attempt();
    await first.settle!(200);
    const second = await attempt();
    await second.settle!(401);

    expect([first.allowed, second.allowed, (await attempt()).allowed]).toEqual([true, true, false]);
  });

  it("charges a responseCost rule what the response's headers say once settled with them, and nothing given a status alone", async () => {
    const gate = createGate(namespace, [{ name: "gate-metered", match: { path: "/gate-metered/*" }, key: "ip", limit: 100, period: "1h", responseCost: "header:x-units" }]);
    const call = () => gate.check(new Request("http://app.test/gate-metered/x", { headers: { "CF-Connecting-IP": "192.0.2.206" } }), createExecutionContext());
    const first = await call();
    await first.settle!(200, new Response("ok", { headers: { "x-units": "60" } }).headers);
    const second = await call();
    await second.settle!(200, { "X-Units": "39" });
    const third = await call();
    await third.settle!(200);

    expect([first.allowed, second.allowed, third.allowed, (await call()).allowed]).toEqual([true, true, true, false]);
    await expect(third.settle!(200, 42 as never)).rejects.toThrow(/^settle: expected the response's headers/);
  });

  it("sends the header forms it is given", async () => {
    const gate = createGate(namespace, rules, { headers: "draft-6", legacyHeaders: false });
    const checked = await gate.check(request({ "CF-Connecting-IP": "192.0.2.202" }), createExecutionContext());
    expect(Object.keys(checked.headers).sort()).toEqual(["RateLimit-Limit", "RateLimit-Policy", "RateLimit-Remaining", "RateLimit-Reset"]);
  });

  it("refuses an address in denyIps with the 403 before any rule, and never limits one in allowIps, as the vars do", async () => {
    const gate = createGate(namespace, rules, { allowIps: ["192.0.2.210"], denyIps: "198.51.100.0/24, 2001:db8:bad::/48" });
    const denied = await gate.check(request({ "CF-Connecting-IP": "198.51.100.9" }), createExecutionContext());
    expect(denied.allowed).toBe(false);
    expect(denied.response?.status).toBe(403);
    const allowed = await Promise.all([1, 2, 3].map(() => gate.check(request({ "CF-Connecting-IP": "192.0.2.210" }), createExecutionContext())));
    expect(allowed.map((c) => [c.allowed, c.headers])).toEqual([[true, {}], [true, {}], [true, {}]]);
  });

  it("throws at construction for an IP list it cannot read, naming the option, as a ConfigError", () => {
    expect(() => createGate(namespace, rules, { denyIps: "10.0.0.1/8" })).toThrow(ConfigError);
    expect(() => createGate(namespace, rules, { denyIps: "10.0.0.1/8" })).toThrow(/^createGate: denyIps: "10\.0\.0\.1\/8" has bits set after its \/8 prefix/);
    expect(() => createGate(namespace, rules, { allowIps: 10 as unknown as string })).toThrow(/^createGate: allowIps must be addresses and CIDRs, comma-separated in a string or in an array of strings, got 10$/);
  });

  it("throws for a request that is not a Request", async () => {
    const gate = createGate(namespace, rules);
    await expect(gate.check("http://x" as unknown as Request, createExecutionContext())).rejects.toThrow(/^createGate\(…\)\.check: expected a Request, got string$/);
  });

  it("throws for no ctx, or one without waitUntil, in the words limit uses", async () => {
    const gate = createGate(namespace, rules);
    const message = (got: string) => new RegExp(`^createGate\\(…\\)\\.check: ctx must be the request's ExecutionContext \\(in Hono, c\\.executionCtx\\), with a waitUntil method; got ${got}$`);
    await expect(gate.check(request(), undefined as unknown as ExecutionContext)).rejects.toThrow(message("undefined"));
    await expect(gate.check(request(), {} as ExecutionContext)).rejects.toThrow(message("an object"));
  });

  it("throws for arguments past the request and ctx, consuming nothing", async () => {
    const gate = createGate(namespace, rules);
    const extra = (gate.check as (...args: unknown[]) => Promise<unknown>)(request({ "CF-Connecting-IP": "192.0.2.203" }), createExecutionContext(), { cost: 2 });
    await expect(extra).rejects.toThrow(/^createGate\(…\)\.check: takes a Request and the request's ExecutionContext, got 3 arguments$/);
  });
});

describe("limiter's charge: a request's real cost once known", () => {
  it("takes units past the limit after the fact, so the key owes and denies until they leave the window", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-sw", limit: 100, period: "1h" });
    const call = await tokens.limit("k", { cost: 10 });
    await call.charge!(140);

    const next = await tokens.limit("k");
    expect(next).toMatchObject({ success: false, remaining: 0, reason: "limit" });
    expect((await tokens.peek("k")).remaining).toBe(0);
  });

  it("leaves a token bucket in debt that its refill pays before anything more is admitted", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-tb", algorithm: "token-bucket", limit: 10, period: "1m" });
    const call = await tokens.limit("k");
    await call.charge!(19);

    const next = await tokens.limit("k");
    expect(next.success).toBe(false);
    // 10 - 20 leaves the bucket 10 tokens short of empty: 11 tokens at one each 6 s, less what refilled meanwhile.
    expect(next.retryAfter).toBeGreaterThan(60_000);
    expect(next.retryAfter).toBeLessThanOrEqual(66_000);
  });

  it("gives back part of what a windowed rule's admission took", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-back", algorithm: "fixed-window", limit: 100, period: "1h" });
    const call = await tokens.limit("k", { cost: 40 });
    await call.charge!(-30);

    expect((await tokens.peek("k")).remaining).toBe(90);
  });

  it("counts the units charged and given back per rule in the metrics", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-metrics", limit: 100, period: "1h" });
    const call = await tokens.limit("k", { cost: 5 });
    await call.charge!(20);
    await call.charge!(-8);
    const units = (direction: string) => metrics.value("floodgate_charged_units_total", { rule: "lib-charge-metrics", direction });
    expect([units("taken"), units("given_back")]).toEqual([20, 8]);
  });

  it("never gives back more than the admission took, settle and refunds included", async () => {
    const judged = limiter(namespace, { name: "lib-charge-settled", limit: 10, period: "1h", count: "failed" });
    const call = await judged.limit("k", { cost: 4 });
    await call.charge!(-3);
    await expect(call.charge!(-2)).rejects.toThrow(/^charge \("lib-charge-settled"\): cannot give back 2 units: the request is counted at 1 now \(it took 4; charges and give-backs since count too\)$/);
    await call.settle!(200);
    await expect(call.charge!(-1)).rejects.toThrow(/cannot give back 1 unit: the request is counted at 0 now/);

    expect((await judged.peek("k")).remaining).toBe(10);
  });

  it("gives back charged units first, the latest charge first, and everything with settle when the rule does not count the request", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-undo", limit: 100, period: "1h", count: "failed" });
    const call = await tokens.limit("k");
    await call.charge!(10);
    await call.charge!(-5);
    expect((await tokens.peek("k")).remaining).toBe(94);
    await expect(call.charge!(-7)).rejects.toThrow(/cannot give back 7 units: the request is counted at 6 now \(it took 1;/);
    await call.settle!(200);
    expect((await tokens.peek("k")).remaining).toBe(100);
  });

  it("leaves a token bucket owing a year's refill at most, however much is charged", async () => {
    const daily = limiter(namespace, { name: "lib-charge-cap", algorithm: "token-bucket", limit: 1, period: "1d" });
    const call = await daily.limit("k");
    await call.charge!(1_000_000);
    await call.charge!(1_000_000);

    const next = await daily.limit("k");
    expect(next.success).toBe(false);
    expect(next.retryAfter).toBeLessThanOrEqual(367 * 86_400_000);
    expect(next.retryAfter).toBeGreaterThan(364 * 86_400_000);
  });

  it("counts a charge past what a window's arithmetic holds as the most it holds, never as nothing", async () => {
    const bytes = limiter(namespace, { name: "lib-charge-huge", limit: 100_000_000, period: "1d" });
    const call = await bytes.limit("k");
    await call.charge!(Number.MAX_SAFE_INTEGER);
    await call.charge!(1e300);
    expect(await bytes.limit("k")).toMatchObject({ success: false, remaining: 0 });
  });

  it("leaves a warming token bucket owing a year's refill at most too", async () => {
    const daily = limiter(namespace, { name: "lib-charge-warm", algorithm: "token-bucket", limit: 1, period: "1d", warmup: "1d" });
    const call = await daily.limit("k");
    await call.charge!(1_000_000);
    // Cold, it refills at a third of the rate: three years at most.
    expect((await daily.limit("k")).retryAfter).toBeLessThanOrEqual(3 * 367 * 86_400_000);
  });

  it("gives back with settle a charge still on its way, and charges nothing after a settle that gave everything back", async () => {
    const judged = limiter(namespace, { name: "lib-charge-race", limit: 100, period: "1h", count: "failed" });
    const call = await judged.limit("k");
    const charging = call.charge!(50);
    await call.settle!(200);
    await charging;
    await call.charge!(20);
    expect((await judged.peek("k")).remaining).toBe(100);
  });

  it("charges a dry-run rule's would-be denial nothing, since it consumed nothing, and lets code that charges every success run", async () => {
    const shadow = limiter(namespace, { name: "lib-charge-dry", limit: 1, period: "1h", dryRun: true });
    await shadow.limit("k");
    const over = await shadow.limit("k");
    expect(over).toMatchObject({ success: true, reason: "dry-run" });
    await over.charge!(50);
    await expect(over.charge!(1.5)).rejects.toThrow(/expected a whole number of units/);
    expect((await shadow.peek("k")).remaining).toBe(0);
  });

  it("refuses to give back under a token bucket or gcra, and changes nothing", async () => {
    for (const algorithm of ["token-bucket", "gcra"] as const) {
      const tokens = limiter(namespace, { name: `lib-charge-no-${algorithm}`, algorithm, limit: 10, period: "1m", burst: 5 });
      const call = await tokens.limit("k", { cost: 3 });
      await expect(call.charge!(-1)).rejects.toThrow(new RegExp(`^charge \\("lib-charge-no-${algorithm}"\\): a "${algorithm}" rule cannot give units back: a bucket keeps no history.*; take the least a request can cost up front, and charge the rest once it is known$`));
      // gcra holds burst + 1.
      expect((await tokens.peek("k")).remaining).toBe(algorithm === "token-bucket" ? 2 : 3);
    }
  });

  it("rejects units that are not a whole number, naming the rule, and charges nothing", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-bad", limit: 10, period: "1m" });
    const call = await tokens.limit("k");
    for (const units of [1.5, Number.NaN, "3", undefined, Number.POSITIVE_INFINITY]) {
      await expect(call.charge!(units as never)).rejects.toThrow(/^charge \("lib-charge-bad"\): expected a whole number of units \(negative to give some back\), got /);
    }
    await call.charge!(0);
    expect((await tokens.peek("k")).remaining).toBe(9);
  });

  it("has no charge for a denial, nor for a concurrency rule, whose slots come back by release", async () => {
    const one = limiter(namespace, { name: "lib-charge-denied", limit: 1, period: "1h" });
    expect("charge" in (await one.limit("k"))).toBe(true);
    expect("charge" in (await one.limit("k"))).toBe(false);
    const slots = limiter(namespace, { name: "lib-charge-slots", algorithm: "concurrency", limit: 2 });
    const held = await slots.limit("k");
    expect("charge" in held).toBe(false);
    await held.release!();
  });

  it("refuses none of a burst whose charges stay within a fast key's limit: charges leave the lease to requests", async () => {
    // A timeout a loaded machine's syncs stay within: what is measured is the lease, not the object's latency.
    const tokens = limiter(namespace, { name: "lib-charge-fast-burst", limit: 1_000, period: "1m", mode: "fast", timeout: "10s" });
    const ctx = createExecutionContext();
    // Staggered, as requests arrive: charges run while later requests wait on a sync.
    const results = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, 3 * i));
        const result = await tokens.limit("k", { ctx });
        if (result.success) await result.charge!(19);
        return result.success;
      }),
    );
    await waitOnExecutionContext(ctx);

    expect(results.filter(Boolean)).toHaveLength(40);
  });

  it("sends a fast key's debt nowhere once the key is reset: the reset object starts full", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-fast-reset", limit: 10, period: "1m", mode: "fast" });
    const ctx = createExecutionContext();
    const call = await tokens.limit("k", { ctx });
    await call.charge!(50);
    await tokens.reset("k");
    await waitOnExecutionContext(ctx);

    expect((await tokens.limit("k", { ctx: createExecutionContext() })).success).toBe(true);
    expect((await tokens.peek("k")).remaining).toBeGreaterThanOrEqual(8);
  });

  it("owes a fast key's charge to its object, which hears of it within a sync interval", async () => {
    const tokens = limiter(namespace, { name: "lib-charge-fast", algorithm: "token-bucket", limit: 10, period: "1m", mode: "fast" });
    const ctx = createExecutionContext();
    const call = await tokens.limit("k", { ctx });
    await call.charge!(19);
    await waitOnExecutionContext(ctx);

    const next = await tokens.limit("k", { ctx: createExecutionContext() });
    expect(next.success).toBe(false);
    // Owed at the object, the 20 units leave the bucket 10 short of empty: a lease alone would have said 6 s.
    expect(next.retryAfter).toBeGreaterThan(60_000);
  });
});

describe("limiter's blockUntilReady", () => {
  it("waits out a denial that ends within the timeout and is then admitted", async () => {
    const paced = limiter(namespace, { name: "lib-wait", limit: 2, period: "1s", algorithm: "fixed-window" });
    await paced.limit("k", { cost: 2 });
    const started = Date.now();
    const result = await paced.blockUntilReady("k", "3s");

    expect(result.success).toBe(true);
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it("counts only the answer it gives, not the denials it waited out", async () => {
    const paced = limiter(namespace, { name: "lib-wait-count", limit: 1, period: "1s", algorithm: "fixed-window" });
    const count = (decision: string) => metrics.value("floodgate_decisions_total", { rule: "lib-wait-count", decision });
    await paced.limit("k");
    expect((await paced.blockUntilReady("k", "3s")).success).toBe(true);
    expect([count("allowed"), count("denied")]).toEqual([2, 0]);
  });

  it("counts the denial it answers with when the wait would end past the timeout", async () => {
    const slow = limiter(namespace, { name: "lib-wait-count-late", limit: 1, period: "1h" });
    await slow.limit("k");
    expect((await slow.blockUntilReady("k", 1_000)).success).toBe(false);
    expect(metrics.value("floodgate_decisions_total", { rule: "lib-wait-count-late", decision: "denied" })).toBe(1);
  });

  it("answers at once with the denial when its wait ends past the timeout, or the cost can never pass", async () => {
    const slow = limiter(namespace, { name: "lib-wait-long", limit: 1, period: "1h" });
    await slow.limit("k");
    const started = Date.now();
    const late = await slow.blockUntilReady("k", 2_000);
    const never = await slow.blockUntilReady("k", "1h", { cost: 5 });

    expect(late).toMatchObject({ success: false, reason: "limit" });
    expect(never).toMatchObject({ success: false, reason: "cost-exceeds-capacity" });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("answers at once with a denial when a gcra hold would end past the timeout, the units given back", async () => {
    const smooth = limiter(namespace, { name: "lib-wait-hold", algorithm: "gcra", limit: 1, period: "1s", burst: 3, delay: 0 });
    await smooth.limit("k");
    const started = Date.now();
    const result = await smooth.blockUntilReady("k", 10);

    expect(result).toMatchObject({ success: false, reason: "limit" });
    expect(result.retryAfter).toBeGreaterThan(900);
    expect(Date.now() - started).toBeLessThan(500);
    // The unit is back: held for a second, the next call is admitted.
    expect((await smooth.blockUntilReady("k", "2s")).success).toBe(true);
  });

  it("says a gcra hold onError decided, refused past the timeout, was onError's: reason error, not limit", async () => {
    const flaky = (env as unknown as { FLAKY: Env["LIMITER"] }).FLAKY;
    await env.FLAKY.get(env.FLAKY.idFromName("lib-wait-hold-error/k")).fail(100, "before");
    const smooth = limiter(flaky, { name: "lib-wait-hold-error", algorithm: "gcra", limit: 1, period: "1s", burst: 3, delay: 0, onError: "local" });
    // Another key's object has answered: no cold start, whose local fallback refuses.
    await smooth.limit("warm");
    expect(await smooth.limit("k")).toMatchObject({ success: true, reason: "error" });

    expect(await smooth.blockUntilReady("k", 10)).toMatchObject({ success: false, reason: "error" });
  });

  it("answers a cost the rule can never grant at once, even while a block hides it", async () => {
    const blocking = limiter(namespace, { name: "lib-wait-blocked", algorithm: "fixed-window", limit: 2, period: "1s", block: "2s" });
    await blocking.limit("k", { cost: 2 });
    await blocking.limit("k");
    const started = Date.now();
    const result = await blocking.blockUntilReady("k", "5s", { cost: 5 });

    expect(result.success).toBe(false);
    expect(Date.now() - started).toBeLessThan(500);
  });

  it("rejects with the signal's reason when aborted while waiting", async () => {
    const paced = limiter(namespace, { name: "lib-wait-abort", limit: 1, period: "10s", algorithm: "fixed-window" });
    await paced.limit("k");
    const controller = new AbortController();
    const waiting = paced.blockUntilReady("k", "20s", { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("client left")), 50);
    await expect(waiting).rejects.toThrow("client left");
  });

  it("rejects a timeout that is not milliseconds or a duration, naming the method", async () => {
    const paced = limiter(namespace, { name: "lib-wait-bad", limit: 1, period: "1s" });
    for (const timeout of [-1, 1.5, "soon", undefined]) {
      await expect(paced.blockUntilReady("k", timeout as never)).rejects.toThrow(/^limiter\("lib-wait-bad"\)\.blockUntilReady: timeout must be milliseconds \(a whole number, 0 or more\) or a duration like "5s", got /);
    }
  });
});
