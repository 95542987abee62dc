#!/usr/bin/env node
// Runs one bench part on its own, for iterating on it: bundles the TypeScript with esbuild, runs the
// part, prints its markdown and writes its section (charts and data) to bench/.work/<id>.section.json.
//
//   node bench/dev/run-part.mjs bench/accuracy.ts            # full size
//   node bench/dev/run-part.mjs bench/accuracy.ts --quick    # what `npm run bench -- --quick` runs
//   node bench/dev/run-part.mjs bench/decision-cost.ts --tiny # smoke-test size: a few seconds
import { mkdir, writeFile } from "node:fs/promises";
import { basename, resolve } from "node:path";
import { launch } from "./launch.mjs";

const [entry, ...flags] = process.argv.slice(2);
if (!entry) {
  console.error("usage: node bench/dev/run-part.mjs <bench/part.ts> [--quick] [--tiny]");
  process.exit(2);
}
const work = resolve("bench/.work");
await mkdir(work, { recursive: true });
const { run } = await launch(entry);
const tiny = flags.includes("--tiny");
const started = performance.now();
const section = await run({ quick: tiny || flags.includes("--quick"), tiny, log: (line) => console.error(`[${basename(entry)}] ${line}`) });
const seconds = ((performance.now() - started) / 1000).toFixed(1);
await writeFile(resolve(work, `${section.id}.section.json`), JSON.stringify(section, null, 2));
console.log(`## ${section.title}\n\n${section.markdown}`);
console.error(`[${basename(entry)}] done in ${seconds} s; section written to bench/.work/${section.id}.section.json`);
