// `npm run deploy`'s gate: scripts/validate-config.mjs refuses any environment, as wrangler resolves it, without rules, an origin or the LIMITER binding.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validate as validateConfig } from "../../scripts/validate-config.mjs";
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

/** Writes `config` to a temp file, or takes its path as it is. */
async function pathOf(config: { toml: string } | { path: string }): Promise<string> {
  if ("path" in config) return config.path;
  const path = join(dir, `${Math.random().toString(36).slice(2)}.toml`);
  await writeFile(path, config.toml);
  return path;
}

/**
 * Runs the check in this process, as the command does without --env (the top level and every [env.<name>]) or with it:
 * the checks themselves, without a Node start and wrangler's import per case.
 */
async function validate(config: { toml: string } | { path: string }, options: { allowDemo?: boolean; env?: string } = {}): Promise<Run> {
  const configPath = await pathOf(config);
  const lines = { stdout: "", stderr: "" };
  const out = { log: (line: string) => void (lines.stdout += `${line}\n`), error: (line: string) => void (lines.stderr += `${line}\n`) };
  const refused = await validateConfig({ configPath, env: options.env, everyEnv: options.env === undefined, allowDemo: options.allowDemo ?? false }, out);
  return { code: refused > 0 ? 1 : 0, ...lines };
}

/** Runs the command itself, `node scripts/validate-config.mjs <config> <args>`, with FLOODGATE_ALLOW_DEMO only when given. */
async function command(config: { toml: string } | { path: string }, options: { allowDemo?: string; args?: string[] } = {}): Promise<Run> {
  const path = await pathOf(config);
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
    expect(run.stderr).toMatch(/floodgate: 1 environment\(s\) refused\n$/);
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
    const allowed = await validate({ toml }, { allowDemo: true });
    expect(allowed, allowed.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(allowed.stdout).toContain("origin demo (allowed on purpose)");

    const [unset, zero, one, flag] = await Promise.all([command({ toml }), command({ toml }, { allowDemo: "0" }), command({ toml }, { allowDemo: "1" }), command({ toml }, { args: ["--allow-demo"] })]);
    expect([unset.code, zero.code, one.code, flag.code]).toEqual([1, 1, 0, 0]);
    expect(unset.stderr).toBe(refused.stderr);
    expect(one.stdout).toBe(allowed.stdout);
  });

  it("passes ORIGIN_URL = \"none\", a deployment that serves only its service binding and admin API", async () => {
    const toml = `${TOP}\n[vars]\nORIGIN_URL = "none"\nRATE_LIMIT_RULES = '[{"name": "per-user", "limit": 5, "period": "1m"}]'\n`;
    const passed = await validate({ toml });
    expect(passed, passed.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(passed.stdout).toContain("origin none (service binding and admin API only)");
  });

  it("lets the demo opt-in allow only the demo: zero rules and a missing binding are still refused", async () => {
    const toml = `name = "floodgate"\ncompatibility_date = "2026-04-20"\n\n[vars]\nORIGIN_URL = "demo"\nRATE_LIMIT_RULES = "[]"\n`;
    const run = await validate({ toml }, { allowDemo: true });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("no rules: RATE_LIMIT_RULES in [vars] has zero rules; write at least one");
    expect(run.stderr).toContain('no LIMITER binding: add [[durable_objects.bindings]] with name = "LIMITER" and class_name = "RateLimiter"');
    expect(run.stderr).not.toContain("demo origin");
  });

  it("refuses any var the Worker would answer 500 to, as the Worker reads it", async () => {
    const cases: [string, string][] = [
      ["FAST_MAX_KEYS", "-3"],
      ["RATE_LIMIT_HEADERS", "draft-99"],
      ["LEGACY_HEADERS", "maybe"],
      ["DENY_IPS", "not-an-ip"],
      ["ALLOW_IPS", "10.0.0.1/8"],
      ["ANALYTICS_SAMPLE", "7"],
    ];
    const runs = await Promise.all(cases.map(([name, value]) => validate({ toml: `${COMPLETE}${name} = "${value}"\n` })));
    runs.forEach((run, i) => {
      expect(run.code, cases[i]![0]).toBe(1);
      expect(run.stderr).toContain(`floodgate: top level: refused:\n  - ${cases[i]![0]}`);
      expect(run.stderr).toContain("(in [vars])");
    });
  });

  it("names an invalid var along with invalid rules or a missing origin, not only once they are fixed", async () => {
    const toml = `${TOP}\n[vars]\nRATE_LIMIT_RULES = '[{"name": "per-ip", "limit": 0, "period": "1m"}]'\nFAST_MAX_KEYS = "-3"\n`;
    const run = await validate({ toml });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('  - rules[0] ("per-ip").limit: expected a positive integer');
    expect(run.stderr).toContain("  - no origin: ORIGIN_URL is not set");
    expect(run.stderr).toContain('  - FAST_MAX_KEYS: expected a positive whole number of keys like "20000", got "-3" (in [vars])');
  });

  it("names every invalid var at once, not one per deploy", async () => {
    const run = await validate({ toml: `${COMPLETE}FAST_MAX_KEYS = "-3"\nLEGACY_HEADERS = "maybe"\nDENY_IPS = "not-an-address"\n` });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('  - FAST_MAX_KEYS: expected a positive whole number of keys like "20000", got "-3" (in [vars])');
    expect(run.stderr).toMatch(/ {2}- LEGACY_HEADERS: .* \(in \[vars\]\)/);
    expect(run.stderr).toMatch(/ {2}- DENY_IPS: .* \(in \[vars\]\)/);
  });

  it("refuses a var named ANALYTICS, which the Worker reads as its Analytics Engine dataset and answers 500 to", async () => {
    const run = await validate({ toml: `${COMPLETE}ANALYTICS = "floodgate"\n` });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("floodgate: top level: refused:\n  - ANALYTICS: expected a Workers Analytics Engine dataset binding");
  });

  it("refuses ANALYTICS_SAMPLE while no ANALYTICS dataset is bound, where the Worker would record nothing, naming both", async () => {
    const dataset = `\n[[analytics_engine_datasets]]\nbinding = "ANALYTICS"\ndataset = "floodgate"\n`;
    const [unbound, bound] = await Promise.all([validate({ toml: `${COMPLETE}ANALYTICS_SAMPLE = "0.1"\n` }), validate({ toml: `${COMPLETE}ANALYTICS_SAMPLE = "0.1"\n${dataset}` })]);
    expect(unbound.code).toBe(1);
    expect(unbound.stderr).toMatch(/floodgate: top level: refused:\n {2}- ANALYTICS_SAMPLE: .*no ANALYTICS dataset is bound.*\[\[analytics_engine_datasets\]\] with binding = "ANALYTICS".* \(in \[vars\]\)\n/);
    expect(bound, bound.stderr).toMatchObject({ code: 0, stderr: "" });
  });

  it("refuses an environment's ANALYTICS_SAMPLE when only the top level binds ANALYTICS, which wrangler does not carry over", async () => {
    const limiter = `[[env.production.durable_objects.bindings]]\nname = "LIMITER"\nclass_name = "RateLimiter"\n`;
    const toml = `${COMPLETE}\n[[analytics_engine_datasets]]\nbinding = "ANALYTICS"\ndataset = "floodgate"\n\n[env.production]\n${limiter}\n[env.production.vars]\n${VARS}ANALYTICS_SAMPLE = "0.1"\n`;
    const run = await validate({ toml });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("floodgate: top level: 1 rule(s) valid");
    expect(run.stderr).toMatch(/floodgate: \[env\.production\]: refused:\n {2}- ANALYTICS_SAMPLE: .*\[\[env\.production\.analytics_engine_datasets\]\].*\(in \[env\.production\.vars\]\) \(wrangler does not inherit analytics_engine_datasets into environments\)/);
  });

  it("refuses ADMIN_TOKEN or ANALYTICS_HASH_KEY among the vars, which wrangler stores and prints in plain text, naming the command for a secret", async () => {
    const runs = await Promise.all(["ADMIN_TOKEN", "ANALYTICS_HASH_KEY"].map((name) => validate({ toml: `${COMPLETE}${name} = "s3cret-value-0123456789"\n` })));
    runs.forEach((run, i) => {
      const name = ["ADMIN_TOKEN", "ANALYTICS_HASH_KEY"][i]!;
      expect(run.code, name).toBe(1);
      expect(run.stderr).toContain(`  - ${name} is a secret, not a var: remove it from [vars] (or --var), where it is stored in plain text and printed by wrangler, and run npx wrangler secret put ${name}`);
      expect(run.stderr + run.stdout).not.toContain("s3cret-value");
    });
  });

  /** A complete wrangler.json in the test's folder, its RATE_LIMIT_RULES written as given (raw JSON text): its path. */
  async function wranglerJson(file: string, rules: string): Promise<string> {
    const path = join(dir, file);
    await writeFile(path, `{"name": "floodgate", "compatibility_date": "2026-04-20", "durable_objects": {"bindings": [{"name": "LIMITER", "class_name": "RateLimiter"}]}, "migrations": [{"tag": "v1", "new_sqlite_classes": ["RateLimiter"]}], "vars": {"ORIGIN_URL": "https://api.example.com", "RATE_LIMIT_RULES": ${rules}}}`);
    return path;
  }

  it("refuses a wrangler.json giving a member twice, which wrangler would settle silently by keeping the last", async () => {
    const rules = '{"rules": [{"name": "dup", "key": "global", "limit": 2, "period": "1m", "limit": 1000}]}';
    const run = await validate({ path: await wranglerJson("dup.json", rules) });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`: "limit" is given twice in vars.RATE_LIMIT_RULES.rules[0], and wrangler keeps only the last, so the other would be ignored; write it once\n`);
  });

  it("refuses a wrangler.json member named __proto__, which wrangler's reader takes as the object's prototype and so drops", async () => {
    const rules = '[{"name": "proto", "key": "global", "limit": 2, "period": "1m", "match": {"__proto__": {"path": "/admin/*"}}}]';
    const run = await validate({ path: await wranglerJson("proto.json", rules) });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`: "__proto__" in vars.RATE_LIMIT_RULES[0].match is read by wrangler as the object's prototype, not as a member, so it would be ignored; remove it\n`);
  });

  it("refuses a RateLimiter that no migration creates, or that one creates key-value backed", async () => {
    const withoutMigration = TOP.replace(/\[\[migrations\]\][\s\S]*$/, "");
    const none = await validate({ toml: `${withoutMigration}\n[vars]\n${VARS}` });
    const kv = await validate({ toml: `${TOP.replace("new_sqlite_classes", "new_classes")}\n[vars]\n${VARS}` });
    expect(none.stderr).toContain('no migration creates RateLimiter: add [[migrations]] with tag = "v1" and new_sqlite_classes = ["RateLimiter"]');
    expect(kv.stderr).toContain("RateLimiter is created by new_classes, which makes it key-value backed");
    expect([none.code, kv.code]).toEqual([1, 1]);
  });

  it("checks one environment when given --env, and --var as overriding its vars", async () => {
    const broken = `${COMPLETE}\n[env.staging]\nroute = "staging.example.com/*"\n`;
    const production = `${broken}\n[env.production]\n[[env.production.durable_objects.bindings]]\nname = "LIMITER"\nclass_name = "RateLimiter"\n\n[env.production.vars]\n${VARS}`;
    const [only, demo] = await Promise.all([
      command({ toml: production }, { args: ["--env", "production"] }),
      command({ toml: production }, { args: ["--env", "production", "--var", "ORIGIN_URL:demo"] }),
    ]);
    expect(only, only.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(only.stdout).toBe("floodgate: [env.production]: 1 rule(s) valid, origin https://api.example.com, LIMITER bound\n");
    expect(demo.stderr).toContain('floodgate: [env.production]: refused:\n  - demo origin: ORIGIN_URL is "demo"');
    const missing = await validate({ toml: production }, { env: "nope" });
    expect(missing.stderr).toContain("has no [env.nope]; wrangler would deploy the top level under that name");
    expect(missing.code).toBe(1);
  });

  it("refuses a --var that is not KEY:VALUE in one line naming it, not with a stack trace", async () => {
    const run = await command({ toml: COMPLETE }, { args: ["--var", "ORIGIN_URL"] });
    expect(run).toMatchObject({ code: 1, stdout: "" });
    expect(run.stderr).toBe('floodgate: refused: --var: expected KEY:VALUE, got "ORIGIN_URL"\n');
  });

  it("answers --help (or -h) with its usage and exits 0, checking nothing", async () => {
    const [long, short] = await Promise.all([command({ toml: "not toml" }, { args: ["--help"] }), command({ toml: "not toml" }, { args: ["-h"] })]);
    for (const run of [long, short]) {
      expect(run, run.stderr).toMatchObject({ code: 0, stderr: "" });
      expect(run.stdout).toContain("usage: node scripts/validate-config.mjs [config] [--env <name>] [--var KEY:VALUE]... [--allow-demo]");
    }
  });

  it("refuses an option it does not know, naming it, rather than taking it for the config's path", async () => {
    const run = await command({ toml: COMPLETE }, { args: ["--dry-run"] });
    expect(run).toMatchObject({ code: 1, stdout: "" });
    expect(run.stderr).toBe("floodgate: refused: --dry-run: unknown option; the options are --env <name>, --var KEY:VALUE, --allow-demo and --help\n");
  });

  it("refuses --env without a name, rather than checking every environment", async () => {
    const run = await command({ toml: COMPLETE }, { args: ["--env"] });
    expect(run).toMatchObject({ code: 1, stdout: "", stderr: "floodgate: refused: --env: expected a value after it\n" });
  });

  it("refuses a second config path rather than checking only the last", async () => {
    const run = await command({ toml: COMPLETE }, { args: [join(ROOT, "wrangler.toml")] });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${join(ROOT, "wrangler.toml")}: one config at a time`);
  });

  it("says what it refused without claiming a deploy it never makes: no \"nothing was deployed\"", async () => {
    const [refused, missing] = await Promise.all([command({ toml: `${TOP}\n[vars]\nRATE_LIMIT_RULES = "[]"\n` }), command({ path: join(dir, "nowhere.toml") })]);
    expect(refused.stderr).toMatch(/\nfloodgate: 1 environment\(s\) refused\n$/);
    expect(missing.stderr).toBe(`floodgate: refused: ${join(dir, "nowhere.toml")} does not exist\n`);
    expect(refused.stderr + missing.stderr).not.toContain("deployed");
  });

  it("refuses the repository's own wrangler.toml as it is: it names no origin", async () => {
    const run = await validate({ path: join(ROOT, "wrangler.toml") }, { allowDemo: true });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('floodgate: top level: refused:\n  - no origin: ORIGIN_URL is not set; add it to [vars], e.g. ORIGIN_URL = "https://api.example.com"');
  });
});

describe("npm run deploy (scripts/deploy.mjs)", () => {
  /** Runs the deploy script with `args`, as `npm run deploy -- <args>` does. */
  function deploy(args: string[], more: NodeJS.ProcessEnv = {}): Promise<Run> {
    const env: NodeJS.ProcessEnv = { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", CI: "1", ...more };
    delete env.FLOODGATE_ALLOW_DEMO;
    if (!("CLOUDFLARE_ENV" in more)) delete env.CLOUDFLARE_ENV;
    return new Promise((resolve) => {
      execFile(process.execPath, [join(ROOT, "scripts/deploy.mjs"), ...args], { cwd: ROOT, env }, (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr });
      });
    });
  }
  const config = async (toml: string) => {
    const path = join(dir, `${Math.random().toString(36).slice(2)}.toml`);
    await writeFile(path, `main = "${join(ROOT, "src/index.ts")}"\n${toml}`);
    return path;
  };

  it("checks the --config and --var wrangler is given, and refuses before wrangler runs", async () => {
    const path = await config(COMPLETE);
    const run = await deploy(["--config", path, "--var", "ORIGIN_URL:demo", "--dry-run", "--outdir", join(dir, "out-demo")]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('demo origin: ORIGIN_URL is "demo"');
    expect(run.stderr).toMatch(/\nfloodgate: 1 environment\(s\) refused; nothing was deployed\n$/);
    expect(run.stdout).not.toContain("--dry-run: exiting now.");
  });

  it("reads -e=<env>, -c=<path> and --cwd as wrangler does, so none of them slips past the check", async () => {
    const demoEnv = `${COMPLETE}\n[env.demo]\n[[env.demo.durable_objects.bindings]]\nname = "LIMITER"\nclass_name = "RateLimiter"\n\n[env.demo.vars]\n${VARS.replace("https://api.example.com", "demo")}`;
    const path = await config(demoEnv);
    const short = await deploy([`-c=${path}`, "-e=demo", "--dry-run", "--outdir", join(dir, "out-short")]);
    expect(short.stderr).toContain('floodgate: [env.demo]: refused:\n  - demo origin: ORIGIN_URL is "demo"');
    const cwd = await mkdtemp(join(dir, "cwd-"));
    await writeFile(join(cwd, "wrangler.toml"), `main = "${join(ROOT, "src/index.ts")}"\n${COMPLETE.replace("https://api.example.com", "demo")}`);
    // Relative, as typed: wrangler reads it from where npm run deploy started, and so must the check.
    const moved = await deploy(["--cwd", relative(ROOT, cwd), "--dry-run", "--outdir", join(dir, "out-cwd")]);
    expect(moved.stderr).toContain('floodgate: top level: refused:\n  - demo origin: ORIGIN_URL is "demo"');
    // wrangler prefers wrangler.jsonc to wrangler.toml in one directory, and so does the check.
    const both = await mkdtemp(join(dir, "both-"));
    await writeFile(join(both, "wrangler.toml"), `main = "${join(ROOT, "src/index.ts")}"\n${COMPLETE}`);
    await writeFile(join(both, "wrangler.jsonc"), JSON.stringify({ name: "floodgate", main: join(ROOT, "src/index.ts"), compatibility_date: "2026-04-20", vars: { ORIGIN_URL: "demo", RATE_LIMIT_RULES: "[]" } }));
    const jsonc = await deploy(["--cwd", both, "--dry-run", "--outdir", join(dir, "out-jsonc")]);
    expect(jsonc.stderr).toContain('demo origin: ORIGIN_URL is "demo"');
    expect([short.code, moved.code, jsonc.code]).toEqual([1, 1, 1]);
  }, 60_000);

  it("reads the environment as wrangler does: an empty --env is the top level, CLOUDFLARE_ENV names one, and the check says which", async () => {
    const production = `${COMPLETE.replace("https://api.example.com", "demo")}\n[env.production]\n[[env.production.durable_objects.bindings]]\nname = "LIMITER"\nclass_name = "RateLimiter"\n\n[env.production.vars]\n${VARS}`;
    const path = await config(production);
    const empty = await deploy([`--config=${path}`, "--env=", "--dry-run", "--outdir", join(dir, "out-empty")]);
    expect(empty.stderr).toContain('floodgate: top level: refused:\n  - demo origin: ORIGIN_URL is "demo"');
    const named = await deploy(["-c", path, "--dry-run", "--outdir", join(dir, "out-cfenv")], { CLOUDFLARE_ENV: "production" });
    expect(named.stdout).toContain("floodgate: [env.production]: 1 rule(s) valid, origin https://api.example.com, LIMITER bound");
    expect([empty.code, named.code]).toEqual([1, 0]);
  }, 120_000);

  it("refuses a --var that is not KEY:VALUE, or an option without its value, in one line naming it, not with a stack trace", async () => {
    const [badVar, noEnv] = await Promise.all([deploy(["--var", "ORIGIN_URL", "--dry-run"]), deploy(["--dry-run", "--env"])]);
    expect(badVar).toMatchObject({ code: 1, stdout: "", stderr: 'floodgate: refused: --var: expected KEY:VALUE, got "ORIGIN_URL"; nothing was deployed\n' });
    expect(noEnv).toMatchObject({ code: 1, stdout: "", stderr: "floodgate: refused: --env: expected a value after it; nothing was deployed\n" });
  });

  it("answers --help (or -h) with its usage and exits 0, checking and deploying nothing", async () => {
    const [long, short] = await Promise.all([deploy(["--help"]), deploy(["--dry-run", "-h"])]);
    for (const run of [long, short]) {
      expect(run, run.stderr).toMatchObject({ code: 0, stderr: "" });
      expect(run.stdout).toContain("usage: npm run deploy [-- [<wrangler deploy options>] [--allow-demo]]");
      expect(run.stdout).not.toContain("refused");
    }
  });

  it("refuses a --config or --cwd that does not exist or is not a file or directory, saying so", async () => {
    const [config, cwd, dirAsConfig, fileAsCwd] = await Promise.all([
      deploy(["--config", join(dir, "nowhere.toml")]),
      deploy(["--cwd", join(dir, "nowhere")]),
      deploy(["--config", dir]),
      deploy(["--cwd", join(ROOT, "wrangler.toml")]),
    ]);
    expect(config.stderr).toBe(`floodgate: refused: ${join(dir, "nowhere.toml")} does not exist; nothing was deployed\n`);
    expect(cwd.stderr).toBe(`floodgate: refused: --cwd ${join(dir, "nowhere")} does not exist; nothing was deployed\n`);
    expect([config.code, cwd.code]).toEqual([1, 1]);
    expect(dirAsConfig.stderr).toBe(`floodgate: refused: ${dir} is not a file; nothing was deployed\n`);
    expect(fileAsCwd.stderr).toBe("floodgate: refused: --cwd " + join(ROOT, "wrangler.toml") + " is not a directory; nothing was deployed\n");
  });

  it("runs wrangler deploy with the same options once the check passes", async () => {
    const path = await config(COMPLETE);
    const run = await deploy(["-c", path, "--var", "FAST_MAX_KEYS:5000", "--dry-run", "--outdir", join(dir, "out-ok")]);
    expect(run, run.stderr).toMatchObject({ code: 0 });
    expect(run.stdout).toContain("floodgate: top level: 1 rule(s) valid, origin https://api.example.com, LIMITER bound");
    expect(run.stdout).toContain("env.FAST_MAX_KEYS (");
    expect(run.stdout).toContain("--dry-run: exiting now.");
  }, 60_000);
});
