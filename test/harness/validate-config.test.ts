// `npm run deploy`'s gate: scripts/validate-config.mjs refuses any environment, as wrangler resolves it, without rules, an origin or the LIMITER binding.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "./root";

const SCRIPT = join(ROOT, "scripts/validate-config.mjs");

const TOP = `
name = "floodgate"
compatibility_date = "2026-04-20"

[[durable_objects.bindings]]
name = "LIMITER"
class_name = "RateLimiter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["RateLimiter"]
`;
const VARS = `ORIGIN_URL = "https://api.example.com"\nRATE_LIMIT_RULES = '[{"name": "per-ip", "key": "ip", "limit": 100, "period": "1m"}]'\n`;
const COMPLETE = `${TOP}\n[vars]\n${VARS}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let dir: string;
beforeAll(async () => void (dir = await mkdtemp(join(tmpdir(), "floodgate-validate-"))));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Runs the validator on `toml` (written to a temp file) or on a path, with FLOODGATE_ALLOW_DEMO only when given. */
async function validate(config: { toml: string } | { path: string }, options: { allowDemo?: string; args?: string[] } = {}): Promise<Run> {
  let path: string;
  if ("path" in config) path = config.path;
  else await writeFile((path = join(dir, `${Math.random().toString(36).slice(2)}.toml`)), config.toml);
  const env: NodeJS.ProcessEnv = { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" };
  delete env.FLOODGATE_ALLOW_DEMO;
  if (options.allowDemo !== undefined) env.FLOODGATE_ALLOW_DEMO = options.allowDemo;
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, path, ...(options.args ?? [])], { cwd: ROOT, env }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr });
    });
  });
}

describe("the deploy gate (scripts/validate-config.mjs)", () => {
  it("passes a complete config: the committed example, and a top level with rules, origin and binding", async () => {
    const example = await validate({ path: join(ROOT, "test/fixtures/deploy/complete.toml") });
    expect(example, example.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(example.stdout).toContain("floodgate: top level: 1 rule(s) valid, origin https://staging-api.example.com, LIMITER bound");
    expect(example.stdout).toContain("floodgate: [env.production]: 1 rule(s) valid, origin https://origin.example.com, LIMITER bound");

    const top = await validate({ toml: COMPLETE });
    expect(top, top.stderr).toMatchObject({ code: 0, stderr: "" });
  });

  it("refuses an [env.production] that only sets a route, naming it and everything wrangler did not carry over", async () => {
    const run = await validate({ toml: `${COMPLETE}\n[env.production]\nroute = "api.example.com/*"\n` });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("floodgate: top level: 1 rule(s) valid");
    expect(run.stderr).toContain("floodgate: [env.production]: refused:");
    expect(run.stderr).toContain(
      "no rules: RATE_LIMIT_RULES is not set; add it to [env.production.vars], e.g. RATE_LIMIT_RULES = '[{\"name\": \"per-ip\", \"key\": \"ip\", \"limit\": 100, \"period\": \"1m\"}]' (wrangler does not inherit [vars] into environments)",
    );
    expect(run.stderr).toContain(
      'no origin: ORIGIN_URL is not set; add it to [env.production.vars], e.g. ORIGIN_URL = "https://api.example.com" (wrangler does not inherit [vars] into environments)',
    );
    expect(run.stderr).toContain(
      'no LIMITER binding: add [[env.production.durable_objects.bindings]] with name = "LIMITER" and class_name = "RateLimiter" (wrangler does not inherit durable_objects into environments)',
    );
    expect(run.stderr).not.toContain("top level: refused");
    expect(run.stderr).toContain("floodgate: 1 environment(s) refused; nothing was deployed");
  });

  it("refuses an environment with its own vars but no durable_objects for the binding alone", async () => {
    const run = await validate({ toml: `${COMPLETE}\n[env.staging]\nroute = "staging.example.com/*"\n\n[env.staging.vars]\n${VARS}` });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("floodgate: [env.staging]: refused:\n  - no LIMITER binding: add [[env.staging.durable_objects.bindings]]");
    expect(run.stderr).not.toMatch(/no rules|no origin|demo origin/);
  });

  it("refuses the demo origin unless FLOODGATE_ALLOW_DEMO=1 or --allow-demo says it is on purpose", async () => {
    const toml = `${TOP}\n[vars]\nORIGIN_URL = "demo"\nRATE_LIMIT_RULES = '[{"name": "per-ip", "key": "ip", "limit": 10, "period": "10s"}]'\n`;
    const refused = await validate({ toml });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('floodgate: top level: refused:\n  - demo origin: ORIGIN_URL is "demo"');
    expect(refused.stderr).toContain("FLOODGATE_ALLOW_DEMO=1 npm run deploy");
    expect((await validate({ toml }, { allowDemo: "0" })).code).toBe(1);

    const allowed = await validate({ toml }, { allowDemo: "1" });
    expect(allowed, allowed.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(allowed.stdout).toContain("origin demo (allowed on purpose)");
    expect((await validate({ toml }, { args: ["--allow-demo"] })).code).toBe(0);
  });

  it("lets the demo opt-in allow only the demo: zero rules and a missing binding are still refused", async () => {
    const toml = `name = "floodgate"\ncompatibility_date = "2026-04-20"\n\n[vars]\nORIGIN_URL = "demo"\nRATE_LIMIT_RULES = "[]"\n`;
    const run = await validate({ toml }, { allowDemo: "1" });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("no rules: RATE_LIMIT_RULES in [vars] has zero rules; write at least one");
    expect(run.stderr).toContain('no LIMITER binding: add [[durable_objects.bindings]] with name = "LIMITER" and class_name = "RateLimiter"');
    expect(run.stderr).not.toContain("demo origin");
  });

  it("refuses the repository's own wrangler.toml as it is: it names no origin", async () => {
    const run = await validate({ path: join(ROOT, "wrangler.toml") }, { allowDemo: "1" });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('floodgate: top level: refused:\n  - no origin: ORIGIN_URL is not set; add it to [vars], e.g. ORIGIN_URL = "https://api.example.com"');
  });
});
