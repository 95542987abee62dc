#!/usr/bin/env node
// Profiles one end-to-end case inside workerd (bench/dev/profile.ts; bench/README.md, "Profiling a
// case"): bundles it (launch.mjs) and runs it.
//
//   node bench/dev/profile.mjs fast-hot                # 8 s of load, profiled
//   node bench/dev/profile.mjs strict-ips --no-profile # workerd CPU per request only
import { launch } from "./launch.mjs";

const { main } = await launch("bench/dev/profile.ts");
try {
  await main(process.argv.slice(2));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
}
