/** Runs scenarios side by side in worker threads; each is seeded by its own name, so where it runs changes nothing. */
import { parentPort, Worker, workerData } from "node:worker_threads";
import { runScenario } from "./engine";
import type { Scenario } from "./scenarios";
import type { ScenarioResult } from "./summary";
import { meanRate } from "./traffic";

export type JobResult =
  | { name: string; ok: true; result: ScenarioResult; seconds: number }
  | { name: string; ok: false; error: string; seconds: number };

const ROLE = "floodgate-simulation-worker";

/** Whether this module is running as one of the pool's workers. */
export function isPoolWorker(): boolean {
  return (workerData as { role?: string } | null)?.role === ROLE;
}

/** A worker's loop: run each scenario it is sent, answer with its result or its error. */
export function serveJobs(): void {
  parentPort!.on("message", (job: { scenario: Scenario; seed: number }) => parentPort!.postMessage(runOne(job.scenario, job.seed)));
}

/**
 * Runs one scenario. floodgate's own log lines (src/metrics/log.ts writes breaker changes and the
 * like with console.log) say nothing about the simulation and would flood the terminal, so they are
 * silenced while it runs.
 */
function runOne(scenario: Scenario, seed: number): JobResult {
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  const write = console.log;
  console.log = () => undefined;
  try {
    return { name: scenario.name, ok: true, result: runScenario(scenario, seed), seconds: seconds() };
  } catch (error) {
    return { name: scenario.name, ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error), seconds: seconds() };
  } finally {
    console.log = write;
  }
}

/** One scenario to run, with the seed it runs on. */
export interface Run {
  scenario: Scenario;
  seed: number;
}

/**
 * A rough cost in seconds, to start the longest runs first so that no long one runs alone at the
 * end: each request, and each isolate's background syncs, as a full run measured them (a per-client
 * key's request meets a new key's object and isolate entry; a pooled relay answers its isolates'
 * syncs itself).
 */
function cost({ scenario: s }: Run): number {
  const requests = (meanRate(s.shape, s.durationMs) * s.durationMs) / 1000;
  const perRequest = s.mode === "strict" ? 15e-6 : s.keys > 1 ? 130e-6 : 5e-6;
  return (requests * perRequest + s.isolates * s.durationMs * 7e-9) * (s.pooled ? 2 : 1);
}

/**
 * Runs every scenario on its seed (every seed's in one queue, so that the workers stay busy to the
 * end) and returns the results in the runs' order. With `jobs` 1 everything runs here; otherwise in
 * up to `jobs` workers started from `entry` (this bundle's file URL). A scenario that throws, or
 * whose worker dies, comes back as failed with the error; the rest go on.
 */
export async function runAll(runs: Run[], jobs: number, entry: URL, log: (line: string) => void): Promise<JobResult[]> {
  const done = new Map<Run, JobResult>();
  const firstSeed = runs[0]?.seed;
  const note = (r: JobResult, seed: number) =>
    log(`${String(done.size).padStart(3)}/${runs.length} ${r.ok ? "ok    " : "FAILED"} ${r.name}${seed === firstSeed ? "" : ` (seed ${seed})`} (${r.seconds} s)${r.ok ? "" : `: ${r.error.split("\n")[0]}`}`);
  if (jobs <= 1 || runs.length <= 1) {
    for (const run of runs) {
      done.set(run, runOne(run.scenario, run.seed));
      note(done.get(run)!, run.seed);
    }
    return runs.map((run) => done.get(run)!);
  }
  const queue = [...runs].sort((a, b) => cost(b) - cost(a));
  await Promise.all(
    Array.from({ length: Math.min(jobs, runs.length) }, async () => {
      const start = () => new Worker(entry, { workerData: { role: ROLE } }).on("error", () => undefined);
      let worker = start();
      for (let run = queue.shift(); run; run = queue.shift()) {
        const { scenario, seed } = run;
        const started = performance.now();
        const r = await new Promise<JobResult>((resolve) => {
          const fail = (error: unknown) => resolve({ name: scenario.name, ok: false, error: `worker died: ${error instanceof Error ? error.message : String(error)}`, seconds: Math.round((performance.now() - started) / 100) / 10 });
          worker.once("message", (message: JobResult) => {
            worker.off("error", fail);
            resolve(message);
          });
          worker.once("error", fail);
          worker.postMessage({ scenario, seed });
        });
        done.set(run, r);
        note(r, seed);
        // A worker that died is replaced; the scenario it was running is reported failed.
        if (!r.ok && r.error.startsWith("worker died")) {
          await worker.terminate().catch(() => undefined);
          worker = start();
        }
      }
      await worker.terminate();
    }),
  );
  return runs.map((run) => done.get(run)!);
}
