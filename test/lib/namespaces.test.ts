// The library through two namespaces of the RateLimiter class in one Worker: objects of one name in each are two objects, counted apart.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { limiter, type LimiterRule } from "../../src/lib";
import { durableObjectName } from "../../src/routing/key";
import type { MarkedLimiter } from "../fixtures/main";
import { delayedSyncs } from "../helpers/namespace";

const namespace = (env as unknown as Env).LIMITER;

describe("limiter through two namespaces of the class", () => {
  // Another binding of the class (a jurisdiction's, which workerd cannot make, would be the same): its object of a name is another object.
  const other = (env as unknown as { FLAKY: Env["LIMITER"] }).FLAKY;

  it("decides a fast key at each namespace's own object, though both limiters name one rule", async () => {
    const rule: LimiterRule = { name: "lib-fast-two-namespaces", limit: 3, period: "1h", mode: "fast" };
    const [here, there] = [limiter(namespace, rule), limiter(other, rule)];
    const ctx = createExecutionContext();
    for (let i = 0; i < 3; i++) expect(await here.limit("k", { ctx })).toMatchObject({ success: true });
    expect(await here.limit("k", { ctx })).toMatchObject({ success: false });
    // The other namespace's object of that name has counted nothing: its key has its whole limit.
    for (let i = 0; i < 3; i++) expect(await there.limit("k", { ctx })).toMatchObject({ success: true });
    await waitOnExecutionContext(ctx);
  });

  it("gives an idle fast key's lease back to its own namespace's object, whichever namespace's request sweeps it", async () => {
    let releases = 0;
    const own = delayedSyncs(async (request) => void (request.release && releases++));
    const idle = limiter(own, { name: "lib-fast-swept", limit: 10, period: "1h", mode: "fast", sync: "100ms" });
    await idle.limit("k", { ctx: createExecutionContext() });
    // Past the lease and the once-a-second sweep: the other namespace's next request sweeps the idle key.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const ctx = createExecutionContext();
    await limiter(other, { name: "lib-fast-sweeping", limit: 10, period: "1h", mode: "fast" }).limit("k", { ctx });
    await waitOnExecutionContext(ctx);
    expect(releases).toBe(1);
  });

  it("limits a strict key from its own namespace's local counters while both namespaces' objects fail", async () => {
    const rule: LimiterRule = { name: "lib-fallback-two-namespaces", limit: 1, period: "1h", onError: "local" };
    const marked = (env as unknown as { MARKED: DurableObjectNamespace<MarkedLimiter> }).MARKED;
    const objectName = await durableObjectName(rule.name, "k");
    await env.FLAKY.get(env.FLAKY.idFromName(objectName)).fail(1, "before");
    await marked.get(marked.idFromName(objectName)).failWith(1, "overloaded");
    // Another key's object has answered: no cold start, whose local fallback refuses.
    await limiter(other, rule).limit("warm");
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      expect(await limiter(other, rule).limit("k")).toMatchObject({ success: true, reason: "error" });
      // The other namespace's key has taken nothing from its own counters.
      expect(await limiter(marked as unknown as Env["LIMITER"], rule).limit("k")).toMatchObject({ success: true, reason: "error" });
    } finally {
      vi.restoreAllMocks();
    }
  });

  it("tells a cost beyond a key's capacity its own namespace's standing, though the other's was just read", async () => {
    const rule: LimiterRule = { name: "lib-capacity-two-namespaces", limit: 2, period: "1h" };
    const here = limiter(namespace, rule);
    await here.limit("k");
    expect(await here.limit("k", { cost: 3 })).toMatchObject({ success: false, reason: "cost-exceeds-capacity", remaining: 1 });
    expect(await limiter(other, rule).limit("k", { cost: 3 })).toMatchObject({ success: false, reason: "cost-exceeds-capacity", remaining: 2 });
  });

  it("counts a rule's new keys for newKeysPerSecond across namespaces: a key tracked through one is not new through the other", async () => {
    const rule: LimiterRule = { name: "lib-new-keys-two-namespaces", limit: 1, period: "1h", newKeysPerSecond: 2 };
    await limiter(namespace, rule).limit("a");
    const there = limiter(other, rule);
    // "a" spends none of the allowance there, so "b" is a key of its own and only "c" goes to #overflow, which has room.
    for (const key of ["a", "b", "c"]) expect(await there.limit(key)).toMatchObject({ success: true });
  });
});
