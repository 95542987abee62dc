/** Runs scenarios side by side in worker threads; each is seeded by its own name, so where it runs changes nothing. */
import { parentPort, Worker, workerData } from "node:worker_threads";
import { runScenario } from "./engine";
import type { Scenario } from "./scenarios";
import type { ScenarioResult } from "./summary";

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

/** A rough cost, to start the longest runs first: the object's own code is O(peers) a sync, and strict runs are short. */
function cost(s: Scenario): number {
  const perSecond = s.mode === "strict" ? 0.02 + s.isolates / 40_000 : s.keys > 1 ? 0.05 : 0.01 + s.isolates / 8_000;
  return (s.durationMs / 1000) * perSecond;
}

/**
 * Runs every scenario and returns the results in the scenarios' order. With `jobs` 1 everything
 * runs here; otherwise in up to `jobs` workers started from `entry` (this bundle's file URL). A
 * scenario that throws, or whose worker dies, comes back as failed with the error; the rest go on.
 */
export async function runAll(scenarios: Scenario[], seed: number, jobs: number, entry: URL, log: (line: string) => void): Promise<JobResult[]> {
  const done = new Map<string, JobResult>();
  const note = (r: JobResult, i: number) => log(`${String(i).padStart(3)}/${scenarios.length} ${r.ok ? "ok    " : "FAILED"} ${r.name} (${r.seconds} s)${r.ok ? "" : `: ${r.error.split("\n")[0]}`}`);
  if (jobs <= 1 || scenarios.length <= 1) {
    for (const s of scenarios) {
      const r = runOne(s, seed);
      done.set(s.name, r);
      note(r, done.size);
    }
    return scenarios.map((s) => done.get(s.name)!);
  }
  const queue = [...scenarios].sort((a, b) => cost(b) - cost(a));
  await Promise.all(
    Array.from({ length: Math.min(jobs, scenarios.length) }, async () => {
      const start = () => new Worker(entry, { workerData: { role: ROLE } }).on("error", () => undefined);
      let worker = start();
      for (let s = queue.shift(); s; s = queue.shift()) {
        const scenario = s;
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
        done.set(scenario.name, r);
        note(r, done.size);
        // A worker that died is replaced; the scenario it was running is reported failed.
        if (!r.ok && r.error.startsWith("worker died")) {
          await worker.terminate().catch(() => undefined);
          worker = start();
        }
      }
      await worker.terminate();
    }),
  );
  return scenarios.map((s) => done.get(s.name)!);
}
