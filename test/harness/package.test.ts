// The package as users get it: `npm pack`, a fresh project made from examples/hono-app installing the tarball, built from its node_modules, type-checked against the packed .d.ts and run in workerd beside the proxy.
import { execFile } from "node:child_process";
import { cp, mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  type BuiltExample,
  type Running,
} from "./examples";
import { bundleWorker } from "./bundle";
import { ROOT } from "./root";

const exec = promisify(execFile);

/** The rule examples/hono-app's rateLimit applies, as a proxy rule for the same requests. */
const PROXY_RULES = [{ name: "api", match: { path: "/api/*" }, key: "header:x-api-key", limit: 5, period: "1m" }];

/** Type probes compiled in the fresh project: each `@ts-expect-error` fails the check if the packed types were `any`. */
const PROBE = `import { RateLimiter, createGate, limiter, type Checked, type LimitResult, type RuleInput } from "floodgate";
import { ipKey, rateLimit } from "floodgate/hono";
import { Hono, type Context } from "hono";

declare const namespace: DurableObjectNamespace<RateLimiter>;
declare const ctx: ExecutionContext;

export async function probe(request: Request): Promise<boolean> {
  const api = limiter(namespace, { name: "api", limit: 5, period: "1m" });
  const result: LimitResult = await api.limit("k", { ctx, cost: 2 });
  // @ts-expect-error: reset is epoch ms
  const reset: string = result.reset;
  // @ts-expect-error: a key is a string
  await api.limit(42);
  await result.charge?.(120);
  const waited: LimitResult = await api.blockUntilReady("k", "5s", { ctx });
  // @ts-expect-error: a timeout is milliseconds or a duration
  await api.blockUntilReady("k", "soon");
  // @ts-expect-error: a duration's number is whole and its unit follows it
  await api.blockUntilReady("k", "3 s");
  // @ts-expect-error: limit is given a key and a cost, not a request to read one from
  limiter(namespace, { name: "api", limit: 5, period: "1m", cost: "header:x-cost" });
  // @ts-expect-error: limit sees no response: charge the result instead
  limiter(namespace, { name: "api", limit: 5, period: "1m", responseCost: "header:x-units" });
  // @ts-expect-error: limit answers with a LimitResult: the code answers a denial
  limiter(namespace, { name: "api", limit: 5, period: "1m", denyResponse: { status: 503 } });
  createGate(namespace, [{ name: "per-ip", limit: 10, period: "10s", denyResponse: { status: 503, body: "{}", contentType: "application/json" } }]);
  limiter(namespace, { name: "quota", algorithm: "fixed-window", limit: 1_000_000, period: "1mo" });
  // @ts-expect-error: only a fixed window counts by calendar months
  limiter(namespace, { name: "quota", limit: 1_000_000, period: "1mo" });
  // @ts-expect-error: "1.5s" is refused at run time, so at compile time too
  limiter(namespace, { name: "api", limit: 5, period: "1.5s" });
  // @ts-expect-error: units are a number
  await result.charge?.("120");
  const checked: Checked = await createGate(namespace, [{ name: "per-ip", key: "ip", limit: 10, period: "10s" }], { headers: "draft-7" }).check(request, ctx);
  // @ts-expect-error: headers is an object of strings
  const header: number | undefined = checked.headers["RateLimit"];
  // @ts-expect-error: not a header form
  createGate(namespace, [], { headers: "draft-99" });
  // @ts-expect-error: a misspelled field
  limiter(namespace, { name: "api", limt: 5, period: "1m" });
  // @ts-expect-error: not an algorithm
  limiter(namespace, { name: "api", algorithm: "leaky-bucket", limit: 5, period: "1m" });
  // @ts-expect-error: a concurrency rule counts no response: its slots come back whatever it is
  limiter(namespace, { name: "slots", algorithm: "concurrency", limit: 5, count: "failed" });
  // @ts-expect-error: a concurrency rule counts requests in flight, not units: no cost to correct
  createGate(namespace, [{ name: "slots", algorithm: "concurrency", limit: 5, responseCost: "header:x-units" }]);
  createGate(namespace, [{ name: "metered", limit: 100, period: "1h", responseCost: "header:x-units" }]);
  // @ts-expect-error: a concurrency rule has no period
  limiter(namespace, { name: "api", algorithm: "concurrency", limit: 5, period: "1m" });
  // @ts-expect-error: not a duration
  createGate(namespace, { rules: [{ name: "per-ip", limit: 10, period: "ten" }] });
  const grouped: string | undefined = ipKey(request.headers.get("cf-connecting-ip"), 64);
  // @ts-expect-error: a prefix length is a number
  ipKey("2001:db8::1", "/64");
  const typed: RuleInput[] = [{ name: "login", match: { path: "/login", methods: ["POST"] }, key: ["ip", "header:x-user"], algorithm: "gcra", limit: 5, period: 60, burst: 2, delay: 1 }];
  createGate(namespace, typed);
  createGate(namespace, [{ name: "api-per-key", key: "header:x-api-key", limit: 100, period: "1m", overrides: [{ keys: ["k-partner"], limit: 10_000 }] }]);
  // @ts-expect-error: an override gives keys their own quota, not their own mode
  createGate(namespace, [{ name: "api-per-key", limit: 100, period: "1m", overrides: [{ keys: ["k"], mode: "fast" }] }]);
  createGate(namespace, [{ name: "plan", algorithm: "fixed-window", limit: 1000, period: "1mo", overrides: [{ keys: ["k"], period: "1y" }] }]);
  // @ts-expect-error: a calendar period is a fixed window's, in an override as in its rule
  createGate(namespace, [{ name: "api", limit: 100, period: "1m", overrides: [{ keys: ["k"], period: "1mo" }] }]);
  // @ts-expect-error: delay is gcra's, in an override as in its rule
  createGate(namespace, [{ name: "tb", algorithm: "token-bucket", limit: 100, period: "1m", overrides: [{ keys: ["k"], delay: 2 }] }]);
  createGate(namespace, [{ name: "api-per-key", key: "header:x-api-key", limit: 100, period: "1m", overrides: [{ keys: ["k-internal"], unlimited: true }] }]);
  // @ts-expect-error: an override that sets nothing
  createGate(namespace, [{ name: "api-per-key", key: "header:x-api-key", limit: 100, period: "1m", overrides: [{ keys: ["k-partner"] }] }]);
  // @ts-expect-error: an unlimited key has no quota
  createGate(namespace, [{ name: "api-per-key", key: "header:x-api-key", limit: 100, period: "1m", overrides: [{ keys: ["k-internal"], unlimited: true, limit: 5 }] }]);
  // @ts-expect-error: a concurrency rule has no period, nor has its override
  createGate(namespace, [{ name: "slots", algorithm: "concurrency", limit: 5, overrides: [{ keys: ["k"], period: "1m" }] }]);
  // @ts-expect-error: limit is given its key by code, which picks each key's rule
  limiter(namespace, { name: "api", limit: 5, period: "1m", overrides: [{ keys: ["k"], limit: 50 }] });
  return result.success && waited.success && checked.allowed && reset === "" && header === 0 && grouped !== "";
}

type Plain = { Bindings: { LIMITER: DurableObjectNamespace } };
export const plain = new Hono<Plain>().use(
  rateLimit<Context<Plain>>({ binding: (c) => c.env.LIMITER, rule: { name: "api", limit: 5, period: "1m" }, key: (c) => c.req.header("x-api-key") }),
  // @ts-expect-error: no such binding in the context's env
  rateLimit<Context<Plain>>({ binding: (c) => c.env.LIMITR, rule: { name: "api", limit: 5, period: "1m" }, key: () => "k" }),
);
// A named context names the variable too: TypeScript infers no type argument once one is given.
export const named = new Hono<Plain>()
  .use(rateLimit<Context<Plain>, "daily">({ binding: (c) => c.env.LIMITER, rule: { name: "daily", limit: 1000, period: "1d" }, key: () => "k", requestPropertyName: "daily" }))
  // @ts-expect-error: the variable's name is a type argument once the context is named
  .use(rateLimit<Context<Plain>>({ binding: (c) => c.env.LIMITER, rule: { name: "burst", limit: 5, period: "1s" }, key: () => "k", requestPropertyName: "burst" }))
  .get("/", (c) => c.json({ left: c.get("daily").remaining satisfies number }));

export const app = new Hono()
  .use(rateLimit({ binding: "LIMITER", rule: { name: "api", limit: 5, period: "1m" }, key: (c) => c.req.header("x-api-key") }))
  .use("/login", rateLimit({ binding: "LIMITER", rule: { name: "login", limit: 5, period: "1h" }, key: (c) => ipKey(c.req.header("cf-connecting-ip")), skipSuccessfulRequests: true, handler: (c, result) => c.json({ retryAfterMs: result.retryAfter }, 429) }))
  .use("/metered/*", rateLimit({ binding: "LIMITER", rule: { name: "metered", limit: 1000, period: "1h", cost: "header:x-estimate", responseCost: "header:x-units" }, key: () => "k" }))
  .use("/plans/*", rateLimit({ binding: "LIMITER", rule: (c) => (c.req.header("x-plan") === "pro" ? { name: "pro", limit: 50, period: "1m" } : { name: "free", limit: 5, period: "1m" }), key: () => "k" }))
  // @ts-expect-error: a rule function returns rules, typed as rules are
  .use(rateLimit({ binding: "LIMITER", rule: () => ({ name: "api", limit: 5, period: "ten" }), key: () => "k" }))
  // @ts-expect-error: skipFailedRequests is a boolean
  .use(rateLimit({ binding: "LIMITER", rule: { name: "api", limit: 5, period: "1m" }, key: () => "k", skipFailedRequests: "yes" }))
  .get("/", (c) => {
    // @ts-expect-error: remaining is a number
    const remaining: string = c.get("rateLimit").remaining;
    return c.text(remaining);
  });
`;

let origin: Awaited<ReturnType<typeof startOrigin>>;
let work: Awaited<ReturnType<typeof scratch>>;
let project: string;
let packed: { filename: string; files: { path: string }[] };
let running: Running | undefined;
const originUrl = () => `http://127.0.0.1:${origin.port}`;

/**
 * Runs a command, failing with what it printed. npm's settings pass through (npm_config_*, the
 * cache above all), but not what an enclosing `npm test` says of this checkout (its package,
 * lifecycle and local prefix), so each npm works on its own `cwd`; update check, audit and funding
 * notes off.
 */
async function sh(cwd: string, file: string, args: string[], timeout = 90_000): Promise<string> {
  const ours = (name: string) => /^npm_/i.test(name) && (!/^npm_config_/i.test(name) || /^npm_config_local_prefix$/i.test(name));
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !ours(name)));
  const env = { ...inherited, npm_config_update_notifier: "false", npm_config_audit: "false", npm_config_fund: "false" };
  try {
    return (await exec(file, args, { cwd, env, timeout, maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(" ")} (in ${cwd}) failed: ${(error as Error).message}\n${stdout}\n${stderr}`.slice(0, 6_000), { cause: error });
  }
}

beforeAll(async () => {
  [origin, work] = await Promise.all([startOrigin(), scratch("floodgate-package-")]);

  // npm pack runs `prepare` (scripts/build-lib.mjs) in this checkout, then packs what `files` names.
  const [info] = JSON.parse(await sh(ROOT, "npm", ["pack", "--json", "--pack-destination", work.dir])) as (typeof packed)[];
  packed = info!;

  // A fresh project from examples/hono-app's sources, depending on the tarball and hono, as a user's would.
  project = join(work.dir, "app");
  await mkdir(project);
  await Promise.all(["src", "wrangler.toml", "tsconfig.json"].map((name) => cp(join(EXAMPLES, "hono-app", name), join(project, name), { recursive: true })));
  const example = JSON.parse(await readFile(join(EXAMPLES, "hono-app/package.json"), "utf8")) as { dependencies: Record<string, string> };
  expect(Object.keys(example.dependencies).sort()).toEqual(["floodgate", "hono"]);
  // hono at the version this checkout's lockfile installed: `npm ci` left it in npm's cache, so no network is needed.
  const hono = (JSON.parse(await readFile(join(ROOT, "node_modules/hono/package.json"), "utf8")) as { version: string }).version;
  await writeFile(
    join(project, "package.json"),
    JSON.stringify({ name: "fresh-app", private: true, type: "module", dependencies: { floodgate: `file:../${packed.filename}`, hono } }, null, 2),
  );
  await sh(project, "npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"]);
  // The types a Workers project has: the repository's copy of @cloudflare/workers-types.
  await mkdir(join(project, "node_modules/@cloudflare"), { recursive: true });
  await symlink(join(ROOT, "node_modules/@cloudflare/workers-types"), join(project, "node_modules/@cloudflare/workers-types"), "dir");
}, 180_000);

afterAll(async () => {
  await running?.dispose();
  await origin?.close();
  await work?.remove();
});

describe("the packed floodgate", () => {
  it("holds the built JavaScript and declarations for both entries, and nothing users don't need", async () => {
    const paths = packed.files.map((f) => f.path).sort();

    expect(paths).toEqual(expect.arrayContaining(["package.json", "README.md", "dist/lib.js", "dist/lib.d.ts", "dist/hono/index.js", "dist/hono/index.d.ts"]));
    expect(paths.filter((p) => !p.startsWith("dist/") && p !== "package.json" && p !== "README.md")).toEqual([]);
    expect(paths.filter((p) => /\.(ts|js)$/.test(p) && !p.endsWith(".d.ts") && !p.endsWith(".js"))).toEqual([]);
    // One shared chunk: both entries import the same module state.
    const [lib, honoEntry] = await Promise.all(["dist/lib.js", "dist/hono/index.js"].map((p) => readFile(join(project, "node_modules/floodgate", p), "utf8")));
    const chunkOf = (text: string) => /from "(?:\.\.?\/)+(chunks\/[^"]+\.js)"/.exec(text)?.[1];
    expect(chunkOf(lib!)).toBeDefined();
    expect(chunkOf(honoEntry!)).toBe(chunkOf(lib!));
    const installed = JSON.parse(await readFile(join(project, "node_modules/floodgate/package.json"), "utf8")) as Record<string, unknown>;
    expect(installed.dependencies).toBeUndefined();
    expect(installed.peerDependenciesMeta).toEqual({ hono: { optional: true } });
  });

  it("type-checks the example and type probes against the packed .d.ts, under bundler, node16 (with the strictest options), nodenext and node10 resolution", async () => {
    await writeFile(join(project, "src/types.probe.ts"), PROBE);
    await writeFile(
      join(project, "tsconfig.nodenext.json"),
      JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { module: "nodenext", moduleResolution: "nodenext" } }),
    );
    // node16 with the options that make floodgate's sources fail to compile (README: The package), which compile its
    // declarations: one run of tsc for both, as each run takes 10 s or more of the suite.
    await writeFile(
      join(project, "tsconfig.node16.json"),
      JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { module: "node16", moduleResolution: "node16", exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, verbatimModuleSyntax: true } }),
    );
    // node10 reads no "exports": floodgate/hono resolves through "typesVersions".
    await writeFile(
      join(project, "tsconfig.node10.json"),
      JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { module: "esnext", moduleResolution: "node10" } }),
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    // The probe's @ts-expect-error lines only pass if the types resolved: `any` would leave them unused, an error.
    // skipLibCheck off: the packed declarations themselves are checked too (and workers-types and hono's, which pass).
    for (const config of ["tsconfig.json", "tsconfig.node16.json", "tsconfig.nodenext.json", "tsconfig.node10.json"]) await sh(project, process.execPath, [tsc, "--noEmit", "--skipLibCheck", "false", "-p", config]);
  }, 240_000);

  it("runs the example built from the installed package: exactly the limit, c.get('rateLimit'), and the proxy's own 429 and header names for the same rule", async () => {
    const config = await readWorkerConfig(join(project, "wrangler.toml"));
    const built: BuiltExample = await buildEntry(config.main, join(work.dir, "out"), "app", "installed", project);
    // floodgate came from the tarball in the project's node_modules, nothing from this checkout's sources.
    expect(built.inputs).toEqual(expect.arrayContaining(["node_modules/floodgate/dist/lib.js", "node_modules/floodgate/dist/hono/index.js"]));
    expect(built.inputs.filter((p) => p.startsWith(".."))).toEqual([]);
    const proxyConfig = await readWorkerConfig(join(ROOT, "wrangler.toml"));
    const proxy = await floodgateWorker({ ...proxyConfig, vars: { RATE_LIMIT_RULES: JSON.stringify(PROXY_RULES) } }, originUrl());
    running = await run([workerOptions(config, built.path), proxy]);

    const app = await concurrently(40, () => running!.fetch("/api/quota", { headers: { "x-api-key": "k-pkg" } }));
    const proxied = await concurrently(40, (i) => running!.fetchWorker("floodgate", `/api/pkg-proxy/${i}`, { headers: { "x-api-key": "k-pkg" } }));

    expect(statusCounts(app)).toEqual({ 200: 5, 429: 35 });
    expect(statusCounts(proxied)).toEqual({ 200: 5, 429: 35 });
    expect(await originCount(originUrl(), "pkg-proxy")).toBe(5);
    const results = app.filter((a) => a.status === 200).map((a) => JSON.parse(a.body) as Record<string, unknown>);
    for (const result of results) expect(result).toEqual({ success: true, limit: 5, remaining: expect.any(Number), reset: expect.any(Number), retryAfter: 0, rule: "api" });
    expect(results.map((r) => r.remaining).sort()).toEqual([0, 1, 2, 3, 4]);

    const [appDenial, proxyDenial] = [app, proxied].map((answers) => answers.find((a) => a.status === 429)!);
    const problem = (a: Answer) => {
      const body = JSON.parse(a.body) as Record<string, unknown>;
      return { ...body, detail: String(body.detail).replace(/\d+/g, "N") };
    };
    expect(problem(appDenial!)).toEqual(problem(proxyDenial!));
    expect(problem(appDenial!)).toEqual({ type: QUOTA_EXCEEDED, title: expect.any(String), status: 429, detail: expect.stringContaining("api"), "violated-policies": ["api"] });
    expect(names(appDenial!.headers)).toEqual(names(proxyDenial!.headers));
    for (const name of ["content-type", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining"]) expect(appDenial!.headers.get(name)).toBe(proxyDenial!.headers.get(name));
    // An allowed response carries the same rate-limit fields too.
    const limitNames = (a: Answer) => names(a.headers).filter((n) => /ratelimit|retry-after/.test(n));
    expect(limitNames(app.find((a) => a.status === 200)!)).toEqual(limitNames(proxied.find((a) => a.status === 200)!));
    expect(limitNames(app.find((a) => a.status === 200)!).length).toBeGreaterThan(0);
  }, 60_000);
});

describe("the proxy", () => {
  it("bundles none of hono: it is the library's optional peer, never the Worker's dependency", async () => {
    const { path } = await bundleWorker();
    const map = JSON.parse(await readFile(`${path}.map`, "utf8")) as { sources: string[] };

    expect(map.sources.some((source) => source.includes("src/index.ts"))).toBe(true);
    expect(map.sources.filter((source) => /node_modules|hono/.test(source))).toEqual([]);
  });
});

function names(headers: Headers): string[] {
  return [...headers.keys()].sort();
}
