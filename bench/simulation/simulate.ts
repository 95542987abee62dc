/**
 * `npm run simulate` (started by bench/simulation/run.mjs): runs the scenarios the options select,
 * side by side in worker threads, and writes bench/SIMULATION.md, bench/simulation.json and the
 * charts under bench/charts/simulation/. A scenario that fails is reported as failed, never dropped.
 */
import { spawnSync } from "node:child_process";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { ROOT } from "../lib/paths";
import { PEER_TTL_MS } from "../../src/fast/peer";
import { MAX_CALLS_PER_SECOND, SATURATED_UNITS_PER_CALL, SATURATION } from "../../src/fast/schedule";
import { renderChart } from "../lib/svg";
import { charts } from "./charts";
import { MIXED_RTT } from "./latency";
import { OVERLOAD, SERVICE } from "./object";
import { OptionError, parseOptions, USAGE } from "./options";
import { isPoolWorker, runAll, serveJobs } from "./pool";
import { renderReport } from "./report";
import { LIFETIME_MS, selectScenarios, STRESS_LIFETIME_MS, type Scenario } from "./scenarios";
import { readByTargets, rerunOnSeeds, verdicts, type SeedVerdicts } from "./targets";

if (isPoolWorker()) serveJobs();

/** Parses the options, runs the scenarios, writes the report; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  let scenarios: Scenario[];
  let options: ReturnType<typeof parseOptions>;
  try {
    options = parseOptions(argv);
    if (options.help) {
      console.log(USAGE);
      return 0;
    }
    scenarios = selectScenarios(options);
  } catch (error) {
    if (!(error instanceof OptionError)) throw error;
    console.error(`simulate: ${error.message}`);
    console.error("run `npm run simulate -- --help` for the options");
    return 2;
  }
  const command = `npm run simulate${argv.length ? ` -- ${argv.join(" ")}` : ""}`;
  const out = resolve(options.out ?? join(ROOT, "bench"));
  const started = Date.now();
  // The tree the numbers come from, read before anything runs (the bundle was built just now).
  const source = sourceOf();
  const log = (line: string) => console.error(`[simulate ${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}`);
  log(`${scenarios.length} scenarios, seed ${options.seed}, ${options.jobs} worker thread(s)${options.quick ? ", quick" : ""}`);

  // The targets again on the next seeds, the scenarios they read run anew: a verdict one seed's luck decided shows.
  const read = scenarios.filter(readByTargets);
  const names = new Set(scenarios.map((s) => s.name));
  const repeated = scenarios.filter((s) => rerunOnSeeds(s, names));
  const later = Array.from({ length: repeated.length > 0 ? options.seeds - 1 : 0 }, (_, k) => options.seed + 1 + k);
  for (const seed of later) log(`seed ${seed}: the ${repeated.length} scenario${repeated.length === 1 ? "" : "s"} the targets read again, queued with the first seed's`);
  const all = await runAll([...scenarios.map((scenario) => ({ scenario, seed: options.seed })), ...later.flatMap((seed) => repeated.map((scenario) => ({ scenario, seed })))], options.jobs, new URL(import.meta.url), log);
  const jobs = all.slice(0, scenarios.length);
  const results = jobs.flatMap((j) => (j.ok ? [j.result] : []));
  const targets = verdicts(results);
  const seeds: SeedVerdicts[] = [{ seed: options.seed, verdicts: targets, failed: jobs.filter((j) => !j.ok && read.some((s) => s.name === j.name)).map((j) => j.name) }];
  for (const [k, seed] of later.entries()) {
    const again = all.slice(scenarios.length + k * repeated.length, scenarios.length + (k + 1) * repeated.length);
    const rerun = new Map(again.flatMap((j) => (j.ok ? [[j.name, j.result] as const] : [])));
    seeds.push({ seed, verdicts: verdicts(results.map((r) => rerun.get(r.name) ?? r).filter((r) => !readByTargets(r) || rerun.has(r.name))), failed: again.filter((j) => !j.ok).map((j) => j.name) });
  }
  const specs = charts(results);
  const seconds = (Date.now() - started) / 1000;
  const machine = `${cpus()[0]?.model.trim() ?? "unknown CPU"}, ${cpus().length} cores, Node ${process.version}`;

  const chartDir = join(out, "charts/simulation");
  await mkdir(chartDir, { recursive: true });
  // A whole run replaces every chart; a partial one (--only) leaves the others alone.
  if (!options.only) for (const file of await readdir(chartDir)) if (file.endsWith(".svg")) await rm(join(chartDir, file));
  for (const spec of specs) await writeFile(join(chartDir, `${spec.file}.svg`), renderChart(spec));

  const byName = new Map(scenarios.map((s) => [s.name, s]));
  const json = {
    seed: options.seed,
    quick: options.quick,
    model: {
      rttBands: MIXED_RTT,
      service: SERVICE,
      overload: OVERLOAD,
      isolateLifetimeMs: { mean: LIFETIME_MS, churnStress: STRESS_LIFETIME_MS },
      fastSchedule: { maxCallsPerSecond: MAX_CALLS_PER_SECOND, saturation: SATURATION, saturatedUnitsPerCall: SATURATED_UNITS_PER_CALL },
      peerTtlMs: PEER_TTL_MS,
    },
    targets,
    acrossSeeds: seeds.map(({ seed, verdicts, failed }) => ({ seed, targets: verdicts.map(({ target, met, measured }) => ({ target, met, measured })), failed })),
    scenarios: jobs.map((j) => {
      if (j.ok) return j.result;
      const s = byName.get(j.name)!;
      return { name: s.name, family: s.family, mode: s.mode, algorithm: s.algorithm, isolates: s.isolates, load: s.load, status: "failed", error: j.error.split("\n")[0] };
    }),
    // Everything that differs from run to run with the same seed lives here.
    run: { command, source, generatedAt: new Date(started).toISOString(), seconds: Math.round(seconds * 10) / 10, machine, jobs: options.jobs, scenarioSeconds: Object.fromEntries(jobs.map((j) => [j.name, j.seconds])) },
  };
  await writeFile(join(out, "simulation.json"), `${JSON.stringify(json, null, 2)}\n`);
  const info = { command, source, seed: options.seed, quick: options.quick, seconds, startedAt: new Date(started).toISOString().slice(0, 16).replace("T", " ") + " UTC", machine, jobs: options.jobs };
  await writeFile(join(out, "SIMULATION.md"), renderReport(jobs, scenarios, info, targets, specs, seeds));
  const failed = [...jobs.filter((j) => !j.ok).map((j) => j.name), ...seeds.slice(1).flatMap((s) => s.failed.map((name) => `${name} (seed ${s.seed})`))];
  log(`done in ${seconds.toFixed(1)} s; ${failed.length ? `${failed.length} scenario(s) failed: ${failed.join(", ")}; ` : ""}wrote ${join(out, "SIMULATION.md")}`);
  return failed.length ? 1 : 0;
}

/** The floodgate the numbers come from: the commit, and whether src/ differed from it. */
function sourceOf(): string {
  const git = (args: string[]) => spawnSync("git", args, { cwd: ROOT, encoding: "utf8" });
  const head = git(["rev-parse", "--short", "HEAD"]);
  if (head.status !== 0) return "not a git checkout";
  const dirty = git(["status", "--porcelain", "--", "src"]).stdout.trim() !== "";
  return `commit ${head.stdout.trim()}${dirty ? " with uncommitted changes in src/" : ""}`;
}
