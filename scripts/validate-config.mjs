// `npm run deploy` runs this first: it refuses wrangler.toml unless the top level and every [env.<name>], as wrangler resolves
// each, has valid rules, a real origin and the LIMITER binding. Usage: node scripts/validate-config.mjs [config] [--allow-demo]
import { build } from "esbuild";
import { experimental_readRawConfig, unstable_readConfig } from "wrangler";
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const configPath = args.find((arg) => arg !== "--allow-demo") ?? resolve(root, "wrangler.toml");
/** The demo origin deployed on purpose; nothing else is ever allowed through. */
const allowDemo = args.includes("--allow-demo") || process.env.FLOODGATE_ALLOW_DEMO === "1";

/** floodgate's validators, bundled from the sources the Worker itself runs. */
async function loadValidators() {
  const result = await build({
    stdin: {
      contents: `export { parseConfig } from "./src/config/rules.ts"; export { parseOrigin } from "./src/config/origin.ts";`,
      resolveDir: root,
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

const { parseConfig, parseOrigin } = await loadValidators();
const read = (env) => unstable_readConfig({ config: configPath, env }, { hideWarnings: true });
const limiterOf = (config) => (config.durable_objects?.bindings ?? []).find((b) => b.name === "LIMITER");

/** What is wrong with one environment's resolved config (empty when it can be deployed), and what it has. */
function check(env, config, top) {
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
      if (parseOrigin(vars.ORIGIN_URL).demo && !allowDemo) {
        problems.push(`demo origin: ORIGIN_URL is "demo", the built-in echo, which answers every request itself and reaches no API; set ORIGIN_URL = "https://api.example.com" in ${section}, or deploy the demo on purpose: FLOODGATE_ALLOW_DEMO=1 npm run deploy`);
      }
    } catch (error) {
      problems.push(error.message);
    }
  }
  const limiter = limiterOf(config);
  const bindings = env === undefined ? "[[durable_objects.bindings]]" : `[[env.${env}.durable_objects.bindings]]`;
  if (limiter === undefined) {
    problems.push(`no LIMITER binding: add ${bindings} with name = "LIMITER" and class_name = "RateLimiter"${notInherited("durable_objects", limiterOf(top))}`);
  } else if (limiter.class_name !== "RateLimiter") {
    problems.push(`LIMITER binding: class_name is ${JSON.stringify(limiter.class_name)}; write class_name = "RateLimiter" in ${bindings}`);
  }
  const origin = vars.ORIGIN_URL === "demo" ? "demo (allowed on purpose)" : vars.ORIGIN_URL;
  return { problems, summary: `${rules.length} rule(s) valid, origin ${origin}, LIMITER bound` };
}

const { rawConfig } = experimental_readRawConfig({ config: configPath });
const top = read(undefined);
let refused = 0;
for (const env of [undefined, ...Object.keys(rawConfig.env ?? {})]) {
  const label = env === undefined ? "top level" : `[env.${env}]`;
  const { problems, summary } = check(env, env === undefined ? top : read(env), top);
  if (problems.length === 0) {
    console.log(`floodgate: ${label}: ${summary}`);
  } else {
    refused++;
    console.error(`floodgate: ${label}: refused:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}
if (refused > 0) {
  console.error(`floodgate: ${refused} environment(s) refused; nothing was deployed`);
  process.exit(1);
}
