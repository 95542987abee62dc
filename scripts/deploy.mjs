// `npm run deploy [-- <wrangler deploy options>]`: checks what wrangler is about to deploy (the same --config, --cwd, --env
// and --var), then runs `wrangler deploy` with the same options. --allow-demo (or FLOODGATE_ALLOW_DEMO=1) lets the demo origin
// through and is not passed on.
import { spawn } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { refuse as refuseCheck, validate, varOf } from "./validate-config.mjs";

/** Ends the deploy on options it cannot read, before anything is deployed. */
const refuse = (problem) => refuseCheck(problem, { deploying: true });

/** Reads the options the check depends on out of wrangler deploy's arguments, which are passed on as they are. */
function readArgs(args) {
  const read = { passed: [], vars: {}, allowDemo: process.env.FLOODGATE_ALLOW_DEMO === "1" };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--allow-demo") {
      read.allowDemo = true;
      continue;
    }
    read.passed.push(arg);
    // yargs takes `--env=x` and `-e=x` as well as `--env x` and `-e x`.
    const [flag, inline] = arg.startsWith("-") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      if (i + 1 >= args.length) refuse(`${flag}: expected a value after it`);
      read.passed.push(args[++i]);
      return args[i];
    };
    if (flag === "--config" || flag === "-c") read.config = value() ?? "";
    else if (flag === "--cwd") read.cwd = value() ?? "";
    else if (flag === "--env" || flag === "-e") read.env = value();
    else if (flag === "--var") {
      // wrangler takes several KEY:VALUE after one --var, as yargs reads an array.
      const values = inline !== undefined ? [inline] : [];
      while (inline === undefined && i + 1 < args.length && !args[i + 1].startsWith("-")) {
        values.push(args[++i]);
        read.passed.push(args[i]);
      }
      for (const text of values) {
        const pair = varOf(text);
        if (!pair) refuse(`--var: expected KEY:VALUE, got ${JSON.stringify(text)}`);
        read.vars[pair[0]] = pair[1];
      }
    }
  }
  return read;
}

const USAGE = `usage: npm run deploy [-- [<wrangler deploy options>] [--allow-demo]]
  checks what wrangler is about to deploy (its --config or --cwd, --env and --var) as node scripts/validate-config.mjs does,
  then runs wrangler deploy with the same options; nothing is deployed when the check refuses
  --allow-demo  lets ORIGIN_URL = "demo" through (so does FLOODGATE_ALLOW_DEMO=1); not passed on
  --help        this text; wrangler deploy's own options: npx wrangler deploy --help`;

// wrangler answers --help anywhere among the options; so does this, before any check.
if (process.argv.slice(2).some((arg) => arg === "--help" || arg === "-h")) {
  console.log(USAGE);
  process.exit(0);
}
const { passed, config, cwd, env, vars, allowDemo } = readArgs(process.argv.slice(2));
// wrangler reads --config from --cwd, and without one finds its config there: so does the check,
// from there, before wrangler is started from here with the same --cwd.
const here = process.cwd();
if (cwd !== undefined && !statSync(resolve(cwd), { throwIfNoEntry: false })?.isDirectory()) {
  refuse(`--cwd ${cwd} ${existsSync(resolve(cwd)) ? "is not a directory" : "does not exist"}`);
}
if (cwd !== undefined) process.chdir(resolve(cwd));
const refused = await validate({ ...(config !== undefined ? { configPath: resolve(config) } : {}), env, vars, allowDemo, deploying: true });
if (refused > 0) process.exit(1);
process.chdir(here);
const wrangler = createRequire(import.meta.url).resolve("wrangler/bin/wrangler.js");
const child = spawn(process.execPath, [wrangler, "deploy", ...passed], { stdio: "inherit" });
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
