// The deploy gate: refuses a wrangler config unless each environment checked, as wrangler resolves it, has valid rules and
// vars, a real origin, the LIMITER binding and a SQLite-backed RateLimiter. `npm run deploy` (scripts/deploy.mjs) checks the
// environment it deploys; run alone it checks the top level and every [env.<name>]:
//   node scripts/validate-config.mjs [config] [--env <name>] [--var KEY:VALUE]... [--allow-demo]
import { fileURLToPath, pathToFileURL } from "node:url";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** floodgate's validators, bundled once per process (the tests run many checks in one). */
let validatorsLoaded;
const loadValidators = () => (validatorsLoaded ??= bundleValidators());

/** floodgate's validators, bundled from the sources the Worker itself runs. */
async function bundleValidators() {
  const { build } = await import("esbuild");
  const result = await build({
    stdin: {
      contents: `export { parseConfig } from "./src/config/rules.ts"; export { parseOrigin } from "./src/config/origin.ts"; export { loadSettings } from "./src/config/index.ts"; export { pathText, repeatedMember } from "./src/config/json.ts";`,
      resolveDir: ROOT,
      loader: "ts",
    },
    bundle: true,
    format: "esm",
    platform: "neutral",
    write: false,
    logLevel: "silent",
  });
  const code = result.outputFiles[0].text;
  return import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
}

/**
 * A member a JSON wrangler config has that wrangler would drop silently, as the message to refuse it with: one given twice
 * (wrangler keeps the last, so a rule's `"limit"` given twice, or RATE_LIMIT_RULES itself, deploys the last), or one named
 * `__proto__` (wrangler's reader sets it as the object's prototype, so neither the check nor the Worker ever sees it). A
 * .jsonc file with comments, which JSON.parse refuses, is not walked.
 */
function droppedIn(configPath, { pathText, repeatedMember }) {
  if (!/\.jsonc?$/.test(configPath)) return undefined;
  const text = readFileSync(configPath, "utf8");
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const found = repeatedMember(text);
  if (found) return `${JSON.stringify(found.name)} is given twice in ${found.path.length === 0 ? "the top level" : pathText(found.path)}, and wrangler keeps only the last, so the other would be ignored; write it once`;
  const proto = prototypePath(parsed);
  if (proto) return `"__proto__" in ${proto.length === 0 ? "the top level" : pathText(proto)} is read by wrangler as the object's prototype, not as a member, so it would be ignored; remove it`;
  return undefined;
}

/** The path of the first object in `value` (as JSON.parse made it, which keeps `__proto__` as a member) with a `__proto__` member; a stack of its own, as deep as JSON.parse takes. */
function prototypePath(value) {
  const stack = [[value, []]];
  while (stack.length > 0) {
    const [node, path] = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (!Array.isArray(node) && Object.hasOwn(node, "__proto__")) return path;
    const entries = Object.entries(node).reverse();
    for (const [name, child] of entries) stack.push([child, [...path, Array.isArray(node) ? Number(name) : name]]);
  }
  return undefined;
}

const limiterOf = (config) => (config.durable_objects?.bindings ?? []).find((b) => b.name === "LIMITER");

/** What is wrong with one environment's resolved config (empty when it can be deployed), and what it has. */
function check(validators, env, config, top, allowDemo) {
  const { parseConfig, parseOrigin, loadSettings } = validators;
  const vars = config.vars ?? {};
  const section = env === undefined ? "[vars]" : `[env.${env}.vars]`;
  // Wrangler copies neither [vars] nor durable_objects into an environment: say so when the top level has what is missing.
  const notInherited = (what, topHas) => (env !== undefined && topHas ? ` (wrangler does not inherit ${what} into environments)` : "");
  const problems = [];
  let rules = [];
  if (vars.RATE_LIMIT_RULES === undefined) {
    problems.push(`no rules: RATE_LIMIT_RULES is not set; add it to ${section}, e.g. RATE_LIMIT_RULES = '[{"name": "per-ip", "key": "ip", "limit": 100, "period": "1m"}]'${notInherited("[vars]", top.vars?.RATE_LIMIT_RULES !== undefined)}`);
  } else {
    try {
      rules = parseConfig(vars.RATE_LIMIT_RULES).rules;
      if (rules.length === 0) problems.push(`no rules: RATE_LIMIT_RULES in ${section} has zero rules; write at least one`);
    } catch (error) {
      problems.push(error.message);
    }
  }
  if (vars.ORIGIN_URL === undefined || vars.ORIGIN_URL === "") {
    problems.push(`no origin: ORIGIN_URL is not set; add it to ${section}, e.g. ORIGIN_URL = "https://api.example.com"${notInherited("[vars]", top.vars?.ORIGIN_URL)}`);
  } else {
    try {
      if (parseOrigin(vars.ORIGIN_URL).kind === "demo" && !allowDemo) {
        problems.push(`demo origin: ORIGIN_URL is "demo", the built-in echo, which answers every request itself and reaches no API; set ORIGIN_URL = "https://api.example.com" in ${section}, or deploy the demo on purpose: FLOODGATE_ALLOW_DEMO=1 npm run deploy${env === undefined ? "" : ` -- --env ${env}`}`);
      }
    } catch (error) {
      problems.push(error.message);
    }
  }
  // Every other var, read as the Worker reads it: a value it would answer 500 to is refused here, whatever the rules and
  // the origin (checked above, so left out) hold, so that one deploy names every problem. ANALYTICS_HASH_KEY is left out:
  // it is a secret (refused below as a var). ANALYTICS is kept: the dataset binding is not among the vars (wrangler
  // refuses a var sharing a binding's name), so a var of that name is what the Worker would read as its dataset, and refuse.
  // The Worker's read stops at the first var at fault: it is read again without that one until none is.
  const read = { ...vars, RATE_LIMIT_RULES: undefined, ORIGIN_URL: undefined, ANALYTICS_HASH_KEY: undefined };
  for (;;) {
    try {
      loadSettings(read);
      break;
    } catch (error) {
      problems.push(`${error.message} (in ${section})`);
      if (read[error.field] === undefined) break;
      read[error.field] = undefined;
    }
  }
  // The Worker serves traffic without the dataset and only logs that the sampling is unused; here it can still be fixed.
  const bindsAnalytics = (of) => (of.analytics_engine_datasets ?? []).some((d) => d.binding === "ANALYTICS");
  if (vars.ANALYTICS_SAMPLE !== undefined && vars.ANALYTICS_SAMPLE !== "" && !bindsAnalytics(config)) {
    const datasets = env === undefined ? "[[analytics_engine_datasets]]" : `[[env.${env}.analytics_engine_datasets]]`;
    problems.push(`ANALYTICS_SAMPLE: set while no ANALYTICS dataset is bound, so the Worker would record nothing: add ${datasets} with binding = "ANALYTICS" and dataset = "floodgate", or remove ANALYTICS_SAMPLE (in ${section})${notInherited("analytics_engine_datasets", bindsAnalytics(top))}`);
  }
  // A secret among the vars is stored in plain text, and wrangler prints every var it deploys.
  for (const secret of ["ADMIN_TOKEN", "ANALYTICS_HASH_KEY"]) {
    if (vars[secret] !== undefined) problems.push(`${secret} is a secret, not a var: remove it from ${section} (or --var), where it is stored in plain text and printed by wrangler, and run npx wrangler secret put ${secret}${env === undefined ? "" : ` --env ${env}`}`);
  }
  const limiter = limiterOf(config);
  const bindings = env === undefined ? "[[durable_objects.bindings]]" : `[[env.${env}.durable_objects.bindings]]`;
  if (limiter === undefined) {
    problems.push(`no LIMITER binding: add ${bindings} with name = "LIMITER" and class_name = "RateLimiter"${notInherited("durable_objects", limiterOf(top))}`);
  } else if (limiter.class_name !== "RateLimiter") {
    problems.push(`LIMITER binding: class_name is ${JSON.stringify(limiter.class_name)}; write class_name = "RateLimiter" in ${bindings}`);
  }
  const migrations = config.migrations ?? [];
  if (!migrations.some((m) => (m.new_sqlite_classes ?? []).includes("RateLimiter"))) {
    const kv = migrations.some((m) => (m.new_classes ?? []).includes("RateLimiter"));
    problems.push(
      kv
        ? `RateLimiter is created by new_classes, which makes it key-value backed; floodgate needs SQLite storage: write new_sqlite_classes = ["RateLimiter"] in that [[migrations]] before the first deploy`
        : `no migration creates RateLimiter: add [[migrations]] with tag = "v1" and new_sqlite_classes = ["RateLimiter"]`,
    );
  }
  const shown = vars.ORIGIN_URL === "demo" ? "demo (allowed on purpose)" : vars.ORIGIN_URL === "none" ? "none (service binding and admin API only)" : vars.ORIGIN_URL;
  return { problems, summary: `${rules.length} rule(s) valid, origin ${shown}, LIMITER bound` };
}

/**
 * Checks `configPath` as wrangler resolves it (without one, the config `wrangler deploy` would use from the current
 * directory: wrangler.json, .jsonc or .toml, or the redirected one a build left in .wrangler/deploy): the environment
 * `env` (the top level when undefined), or with `everyEnv` the top level and every [env.<name>]; `vars` (KEY → VALUE, as
 * wrangler's --var) override each one's [vars]. Writes one line per environment to `out` (the console, or a test's
 * sink), a refusal saying that nothing was deployed when `deploying` (npm run deploy's check); resolves to the number refused.
 */
export async function validate({ configPath, env, everyEnv = false, vars = {}, allowDemo = false, deploying = false }, out = console) {
  const after = outcome(deploying);
  if (configPath !== undefined && !statSync(configPath, { throwIfNoEntry: false })?.isFile()) {
    out.error(`floodgate: refused: ${configPath} ${existsSync(configPath) ? "is not a file" : "does not exist"}${after}`);
    return 1;
  }
  // Imported here, not at the top: a refusal that needs no config (a missing file or --cwd) answers without wrangler's load.
  const { experimental_readRawConfig, unstable_readConfig } = await import("wrangler");
  // As wrangler resolves it: --env, else CLOUDFLARE_ENV; an empty name is the top level.
  const named = everyEnv ? undefined : (env ?? process.env.CLOUDFLARE_ENV);
  env = named ? named : undefined;
  const found = { useRedirectIfAvailable: true };
  const raw = experimental_readRawConfig({ config: configPath }, found);
  if (!raw.configPath) {
    out.error(`floodgate: refused: no wrangler.json, wrangler.jsonc or wrangler.toml in ${process.cwd()}${after}`);
    return 1;
  }
  const validators = await loadValidators();
  const read = (name) => {
    // "" names the top level whatever CLOUDFLARE_ENV says, as wrangler reads an empty --env.
    const config = unstable_readConfig({ config: configPath, env: name ?? "" }, { ...found, hideWarnings: true });
    return { ...config, vars: { ...config.vars, ...vars } };
  };
  const { rawConfig } = raw;
  configPath = raw.configPath;
  const dropped = droppedIn(configPath, validators);
  if (dropped) {
    out.error(`floodgate: refused: ${configPath}: ${dropped}${after}`);
    return 1;
  }
  if (env !== undefined && !Object.hasOwn(rawConfig.env ?? {}, env)) {
    out.error(`floodgate: [env.${env}]: refused: ${configPath} has no [env.${env}]; wrangler would deploy the top level under that name`);
    out.error(`floodgate: 1 environment(s) refused${after}`);
    return 1;
  }
  const top = read(undefined);
  const names = everyEnv ? [undefined, ...Object.keys(rawConfig.env ?? {})] : [env];
  let refused = 0;
  for (const name of names) {
    const label = name === undefined ? "top level" : `[env.${name}]`;
    const { problems, summary } = check(validators, name, name === undefined ? top : read(name), top, allowDemo);
    if (problems.length === 0) {
      out.log(`floodgate: ${label}: ${summary}`);
    } else {
      refused++;
      out.error(`floodgate: ${label}: refused:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    }
  }
  if (refused > 0) out.error(`floodgate: ${refused} environment(s) refused${after}`);
  return refused;
}

/** What a refusal adds: npm run deploy says it deployed nothing; the check alone, which never deploys, says no more. */
const outcome = (deploying) => (deploying ? "; nothing was deployed" : "");

/** Ends the command on options it cannot read, in one line as any refusal, not with a stack trace. */
export function refuse(problem, { deploying = false } = {}) {
  console.error(`floodgate: refused: ${problem}${outcome(deploying)}`);
  process.exit(1);
}

/** `--var KEY:VALUE` (or `--var=KEY:VALUE`) into [KEY, VALUE], as wrangler reads it; undefined when it has no colon. */
export function varOf(text) {
  const at = text.indexOf(":");
  return at > 0 ? [text.slice(0, at), text.slice(at + 1)] : undefined;
}

const USAGE = `usage: node scripts/validate-config.mjs [config] [--env <name>] [--var KEY:VALUE]... [--allow-demo]
  config        the wrangler config to check (default: the repository's wrangler.toml)
  --env <name>  checks [env.<name>] alone (default: the top level and every [env.<name>])
  --var K:V     overrides a var, as wrangler's --var does
  --allow-demo  lets ORIGIN_URL = "demo" through (so does FLOODGATE_ALLOW_DEMO=1)
  --help        this text`;

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    process.exit(0);
  }
  let configPath;
  let env;
  const vars = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--allow-demo") continue;
    if (arg === "--env") {
      if (i + 1 >= args.length) refuse("--env: expected a value after it");
      env = args[++i];
    } else if (arg.startsWith("--env=")) env = arg.slice("--env=".length);
    else if (arg === "--var" || arg.startsWith("--var=")) {
      const text = arg === "--var" ? (args[++i] ?? "") : arg.slice("--var=".length);
      const pair = varOf(text);
      if (!pair) refuse(`--var: expected KEY:VALUE, got ${JSON.stringify(text)}`);
      vars[pair[0]] = pair[1];
    } else if (arg.startsWith("-")) refuse(`${arg}: unknown option; the options are --env <name>, --var KEY:VALUE, --allow-demo and --help`);
    else if (configPath !== undefined) refuse(`${arg}: one config at a time (${configPath} is already given)`);
    else configPath = arg;
  }
  const allowDemo = args.includes("--allow-demo") || process.env.FLOODGATE_ALLOW_DEMO === "1";
  const refused = await validate({ configPath: configPath ?? resolve(ROOT, "wrangler.toml"), env, everyEnv: env === undefined, vars, allowDemo });
  if (refused > 0) process.exit(1);
}
