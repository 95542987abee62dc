// The library through two namespaces of the RateLimiter class in one Worker: objects of one name in each are two objects, counted apart.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/env";
import { limiter, type LimiterRule } from "../../src/lib";
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
});
