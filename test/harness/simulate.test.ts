// npm run simulate at smoke-test size: it runs, the same seed gives the same numbers, bad options are refused by name, a failed scenario is reported, relays spare the key's object calls and restart.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runScenario } from "../../bench/simulation/engine";
import { renderReport } from "../../bench/simulation/report";
import { CONTINENTS } from "../../bench/simulation/latency";
import { RELAY_GAP_MS } from "../../src/fast/relay";
import { selectScenarios } from "../../bench/simulation/scenarios";
import type { Verdict } from "../../bench/simulation/targets";
import { ROOT } from "./root";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function simulate(args: string[]): { status: number | null; stderr: string; out: string } {
  const out = mkdtempSync(join(tmpdir(), "floodgate-sim-"));
  dirs.push(out);
  const run = spawnSync(process.execPath, ["bench/simulation/run.mjs", ...args, "--out", out], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
  return { status: run.status, stderr: run.stderr, out };
}

const json = (out: string) =>
  JSON.parse(readFileSync(join(out, "simulation.json"), "utf8")) as { scenarios: Record<string, unknown>[]; targets: Verdict[]; acrossSeeds: { seed: number; targets: Verdict[] }[]; run: unknown };
/** `only`, 8 isolates for 12 simulated seconds, on seed 3 and again on seed 4: the run, which must have succeeded. */
function onTwoSeeds(only: string): ReturnType<typeof simulate> {
  const run = simulate(["--only", only, "--isolates", "8", "--seconds", "12", "--seed", "3", "--seeds", "2"]);
  expect(run.status, run.stderr).toBe(0);
  return run;
}
/** One fast and one strict scenario, 12 simulated seconds each. */
const TINY = ["--only", "fast-sw-global-i8-1x,fast-tb-global-i8-10x,strict-hot-i8-1000rps", "--isolates", "8", "--seconds", "12"];

describe("npm run simulate", () => {
  it("runs tiny scenarios and gives each the issue's fields, a report and charts", () => {
    const { status, stderr, out } = simulate([...TINY, "--seed", "3"]);
    expect(status, stderr).toBe(0);
    const { scenarios } = json(out);
    expect(scenarios.map((s) => s.name)).toEqual(["fast-sw-global-i8-1x", "fast-tb-global-i8-10x", "strict-hot-i8-1000rps"]);
    for (const s of scenarios) {
      for (const field of ["name", "mode", "algorithm", "isolates", "load", "maxPerWindowOverLimit", "tokenExcess", "underAdmission", "objectCallsPerSecondPeak", "objectCallsPer100Requests", "waitedForObject", "errors"]) {
        expect(s, `${String(s.name)}.${field}`).toHaveProperty(field);
      }
      expect(s.status).toBe("ok");
      expect(s.objectCallsPer100Requests).toBeGreaterThan(0);
    }
    // A sliding window is read per window, a token bucket by its excess: each has its own figure.
    expect(typeof scenarios[0]!.maxPerWindowOverLimit).toBe("number");
    expect(typeof scenarios[1]!.tokenExcess).toBe("number");
    const report = readFileSync(join(out, "SIMULATION.md"), "utf8");
    expect(report).toContain("## Targets");
    expect(report).toContain("npm run simulate -- --only");
    expect(existsSync(join(out, "charts/simulation/calls-per-second.svg"))).toBe(true);
  }, 30_000);

  it("reads the targets again on the next seeds, running again the scenarios they read", () => {
    const { status, stderr, out } = simulate([...TINY, "--seed", "3", "--seeds", "2"]);
    expect(status, stderr).toBe(0);
    const { acrossSeeds, targets } = json(out);
    expect(acrossSeeds.map((s) => s.seed)).toEqual([3, 4]);
    expect(acrossSeeds[1]!.targets).toHaveLength(targets.length);
    expect(stderr).toContain("seed 4: the 2 scenarios the targets read");
    expect(readFileSync(join(out, "SIMULATION.md"), "utf8")).toContain("### The same targets on other seeds");
  }, 30_000);

  it("reads the per-client keys on the first seed only", () => {
    const { stderr, out } = onTwoSeeds("fast-sw-global-i8-1x,fast-sw-per-client-i8");
    expect(stderr).toContain("seed 4: the 1 scenario the targets read again");
    expect(readFileSync(join(out, "SIMULATION.md"), "utf8")).toContain("but the per-client keys' (`fast-sw-per-client-i8`");
  }, 30_000);

  it("reads aggregate: none's global keys on the first seed only where the default's run beside them", () => {
    const { stderr, out } = onTwoSeeds("fast-sw-global-i8-1x,auto-sw-global-i8-1x");
    expect(stderr).toContain("seed 4: the 1 scenario the targets read again");
    expect(readFileSync(join(out, "SIMULATION.md"), "utf8")).toContain('but the 1 of `aggregate: "none"` set beside the default\'s');
  }, 30_000);

  it("reads the cost target on a further seed from the default's runs alone", () => {
    const { out } = onTwoSeeds("fast-sw-300per30s-i8-10x,auto-sw-300per30s-i8-10x");
    const [first, further] = json(out).acrossSeeds.map((s) => s.targets.find((t) => t.target.startsWith("10× load, 8 isolates")));
    expect(first!.measured).toContain('`aggregate: "none"`');
    expect(further!.measured).toMatch(/^`aggregate: "auto"`: sliding window 300\/30 s: /);
  }, 30_000);

  it("gives the same scenarios for the same seed, in worker threads or not, and others for another seed", () => {
    const a = simulate([...TINY, "--seed", "3"]);
    const b = simulate([...TINY, "--seed", "3", "--jobs", "1"]);
    const c = simulate([...TINY, "--seed", "4"]);
    expect([a.status, b.status, c.status]).toEqual([0, 0, 0]);
    const { run: _a, ...first } = json(a.out);
    const { run: _b, ...second } = json(b.out);
    expect(second).toEqual(first);
    expect(json(c.out).scenarios).not.toEqual(first.scenarios);
  }, 90_000);

  it.each([
    [["--isolates", "0"], "--isolates"],
    [["--isolates", "8,,64"], "--isolates"],
    [["--seed", "-1"], "--seed"],
    [["--seed"], "--seed"],
    [["--seeds", "0"], "--seeds"],
    [["--seeds", "11"], "--seeds"],
    [["--only", "no-such-scenario"], "--only"],
    [["--quick=yes"], "--quick"],
    [["--frobnicate"], "--frobnicate"],
  ])("refuses %j, naming %s, and exits non-zero", (args, named) => {
    const { status, stderr, out } = simulate(args);
    expect(status).not.toBe(0);
    expect(stderr).toContain(named);
    expect(existsSync(join(out, "simulation.json"))).toBe(false);
  });

  it("sends the key's object fewer calls through relays than straight from the isolates, on the same load", () => {
    // 20 s of 4,096 isolates at 10×: every isolate's first sync comes in the first seconds, and a location's relay sends them together.
    const only = ["fast-sw-global-i4096-10x", "relay-sw-global-i4096-10x"];
    const [direct, relayed] = selectScenarios({ quick: true, isolates: [4096], only, seconds: 20 }).map((s) => runScenario(s, 1));
    expect(relayed!.detail.relay!.syncsPerBatch).toBeGreaterThan(1);
    expect(relayed!.detail.calls).toBeLessThan(direct!.detail.calls / 2);
  });

  it("runs the default, aggregate: auto, straight at 64 isolates but for first syncs, and through the continents' relays at 512", () => {
    const only = ["auto-sw-global-i64-10x", "auto-sw-global-i512-10x"];
    const [few, crowd] = selectScenarios({ quick: false, isolates: [64, 512], only, seconds: 20 }).map((s) => runScenario(s, 1));
    // A global key's first sync in each isolate goes through its continent's relay, and no other.
    expect(few!.detail.relay!.calls).toBeGreaterThan(0);
    expect(few!.detail.relay!.calls).toBeLessThanOrEqual(few!.detail.isolatesBorn);
    expect(crowd!.detail.relay!.relays).toBeLessThanOrEqual(CONTINENTS.length);
    expect(crowd!.detail.relay!.syncsPerBatch).toBeGreaterThan(1);
    // Past its first sync each isolate's syncs reach the key's object in its continent's batches, at most one per relay gap.
    expect(crowd!.objectCallsPerSecondPeak).toBeLessThanOrEqual((CONTINENTS.length * 1_000) / RELAY_GAP_MS + crowd!.detail.objectPeakByKind.first);
    expect(crowd!.maxPerWindowOverLimit).toBeLessThanOrEqual(1.01);
  });

  it("restarts relays during a run, losing the syncs waiting there, and the limit still holds", () => {
    // Isolates and relays live 30 s on average here, so in 40 s most of the 64 relays restart.
    const [churn] = selectScenarios({ quick: true, isolates: [512], only: ["relay-churn-sw-global-i512-10x"], seconds: 40 }).map((s) => runScenario(s, 1));
    expect(churn!.detail.relay!.restarts).toBeGreaterThan(10);
    expect(churn!.maxPerWindowOverLimit).toBeLessThanOrEqual(1.01);
  });

  it("gives every fast request that waited after the warm-up one cause, and a strict run none", () => {
    const only = ["fast-sw-global-i64-1x", "strict-hot-i8-1000rps"];
    const [fast, strict] = selectScenarios({ quick: true, isolates: [8, 64], only, seconds: 30 }).map((s) => runScenario(s, 1));
    const causes = Object.values(fast!.detail.waitsByCause!);
    const waited = Math.round(fast!.waitedForObject * fast!.detail.steadyRequests);
    expect(waited).toBeGreaterThan(0);
    expect(causes.reduce((a, b) => a + b, 0)).toBe(waited);
    // An isolate born after the warm-up waits on its first call.
    expect(fast!.detail.waitsByCause!.first).toBeGreaterThan(0);
    expect(strict!.detail.waitsByCause).toBeNull();
  });

  it("runs the pooled-relay PROTOTYPE within the bound, its key's object hearing from the locations only", () => {
    const [pooled] = selectScenarios({ quick: false, isolates: [512], only: ["proto-pool-sw-global-i512-10x"], seconds: 20 }).map((s) => runScenario(s, 1));
    expect(pooled!.status).toBe("ok");
    expect(pooled!.maxPerWindowOverLimit).toBeLessThanOrEqual(1.01);
    // 64 relays, and a fresh peer for each that restarted: never one per isolate (512).
    expect(pooled!.detail.objectMaxPeers).toBeLessThanOrEqual(64 + pooled!.detail.relay!.restarts);
  });

  it("reports a scenario that failed as failed, with its error, rather than dropping it", () => {
    const scenarios = selectScenarios({ quick: true, isolates: [8], only: ["fast-sw-global-i8-1x"], seconds: undefined });
    const failed = { name: "fast-sw-global-i8-1x", ok: false as const, error: "Error: boom\n    at somewhere", seconds: 0.1 };
    const info = { command: "npm run simulate", source: "commit abc", seed: 1, quick: true, seconds: 1, startedAt: "now", machine: "test", jobs: 1 };
    const report = renderReport([failed], scenarios, info, [], []);
    expect(report).toContain("1 failed");
    expect(report).toContain("## Failed scenarios");
    expect(report).toContain("`fast-sw-global-i8-1x` (0.1 s): `Error: boom`");
  });
});
