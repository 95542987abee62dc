#!/usr/bin/env node
// `npm run bench` / `npm run bench -- --quick` (`--only end-to-end,cost` runs just those parts):
// bundles the TypeScript orchestrator, then runs it. See bench/README.md.
import { launch } from "./dev/launch.mjs";

process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));
const { main } = await launch("bench/main.ts");
process.exitCode = await main(process.argv.slice(2));
