// `npm run deploy` runs this first: it validates wrangler.toml's floodgate variables, for every environment, with floodgate's own parser.
import { build } from "esbuild";
import { experimental_readRawConfig, unstable_readConfig } from "wrangler";
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const configPath = process.argv[2] ?? resolve(root, "wrangler.toml");

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
const { rawConfig } = experimental_readRawConfig({ config: configPath });
const environments = [undefined, ...Object.keys(rawConfig.env ?? {})];
let failures = 0;
for (const env of environments) {
  const label = env === undefined ? "top level" : `[env.${env}]`;
  const vars = unstable_readConfig({ config: configPath, env }, { hideWarnings: true }).vars ?? {};
  try {
    const { rules } = parseConfig(vars.RATE_LIMIT_RULES);
    parseOrigin(vars.ORIGIN_URL);
    console.log(`floodgate: ${label}: ${rules.length} rule(s) valid, origin ${vars.ORIGIN_URL ?? "demo"}`);
  } catch (error) {
    failures++;
    console.error(`floodgate: ${label}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
if (failures > 0) {
  console.error(`floodgate: ${failures} environment(s) invalid; nothing was deployed`);
  process.exit(1);
}
