// The library in a Worker that binds RateLimiter under a name of its own: a fast rule's relays find the class's namespace, not env.LIMITER.
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { LimitResult } from "../../src/limiter/result";
import { ROOT } from "./root";
import { WORKER_BUILD } from "./worker-build";

const ENTRY = `
import { limiter } from "./src/lib";
export { RateLimiter } from "./src/lib";
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const api = limiter(env.RL, { name: "api", limit: 3, period: "1m", mode: "fast", aggregate: url.searchParams.get("aggregate") });
    return Response.json(await api.limit(url.searchParams.get("key"), { ctx, location: "AMS", continent: "EU" }));
  },
};`;

let mf: Miniflare;

beforeAll(async () => {
  const out = await build({ ...WORKER_BUILD, stdin: { contents: ENTRY, resolveDir: ROOT, loader: "ts" }, write: false });
  mf = new Miniflare({
    modules: true,
    script: out.outputFiles[0]!.text,
    compatibilityDate: "2025-09-01",
    durableObjects: { RL: { className: "RateLimiter", useSQLite: true } },
  });
  await mf.ready;
});

afterAll(() => mf?.dispose());

async function limit(key: string, aggregate: string): Promise<LimitResult> {
  return (await (await mf.dispatchFetch(`http://app.test/?key=${key}&aggregate=${aggregate}`)).json()) as LimitResult;
}

for (const aggregate of ["location", "continent"]) {
  it(`admits a fast rule's limit through its ${aggregate}'s relay with RateLimiter bound as RL`, { timeout: 30_000 }, async () => {
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await limit(`k-${aggregate}`, aggregate));
    expect(results.map((r) => r.success)).toEqual([true, true, true, false]);
    expect(results.map((r) => r.reason)).toEqual(["local", "local", "local", expect.stringMatching(/^(limit|cache)$/)]);
  });
}
