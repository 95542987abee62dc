#!/usr/bin/env node
// `npm run simulate` / `npm run simulate -- --quick` (see `--help`): bundles the TypeScript
// simulator with esbuild into bench/.work/simulate.mjs, then runs it. See bench/SIMULATION.md.
import { launch } from "../dev/launch.mjs";

process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));
const { main } = await launch("bench/simulation/simulate.ts");
process.exitCode = await main(process.argv.slice(2));
