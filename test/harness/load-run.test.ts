// scripts/load-run.mjs reads its options before it starts anything: a run takes minutes and all of the machine.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./root";

/** Runs `node scripts/load-run.mjs <args>`; each case here ends before wrangler or the origin would start. */
function loadRun(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, "scripts/load-run.mjs"), ...args], { cwd: ROOT, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr });
    });
  });
}

describe("node scripts/load-run.mjs: its options", () => {
  it("answers --help with its usage and exits 0, running nothing", async () => {
    const run = await loadRun(["--help"]);
    expect(run, run.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toContain("usage: node scripts/load-run.mjs [--connections <n>] [--requests <n>] [--cases <name>,<name>…]");
  });

  it("refuses an unknown option, or a value it cannot use, in one line naming it, not with a stack trace", async () => {
    const runs = await Promise.all([["--bogus"], ["--cases", "strict-global,nope"], ["--requests", "abc"], ["--connections", "0"]].map(loadRun));
    expect(runs.map((r) => r.code)).toEqual([2, 2, 2, 2]);
    const first = runs.map((r) => r.stderr.split("\n")[0]);
    expect(first[0]).toBe("load-run: --bogus: unknown option; the options are --connections, --requests, --cases and --help");
    expect(first[1]).toBe('load-run: --cases: no case named "nope"; the cases are bare, strict-global, fast-global, fast-ip, strict-ip');
    expect(first[2]).toBe('load-run: --requests: expected a positive integer, got "abc"');
    expect(first[3]).toBe('load-run: --connections: expected a positive integer, got "0"');
    for (const run of runs) expect(run.stderr).not.toContain("    at ");
  });
});
