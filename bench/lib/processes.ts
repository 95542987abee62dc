/** Child processes for the bench: started with a readiness handshake, measured through /proc, always stopped. */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";

/** A started child: its handshake line, its pid, and how to stop it. */
export interface Running<T> {
  pid: number;
  ready: T;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let hooked = false;

/** Kills whatever is still running when the bench process exits, however it exits. */
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", () => {
    for (const child of live) child.kill("SIGKILL");
  });
}

export interface StartOptions<T> {
  /** for messages */
  name: string;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** reads a stdout line: the ready message, or undefined to keep waiting; default: the first JSON line */
  ready?: (line: string) => T | undefined;
}

/**
 * Starts `command args` and waits for its ready line on stdout (by default the first line that is a
 * JSON object), or fails with its stderr if it exits or takes longer than `timeoutMs`.
 */
export function startChild<T>(command: string, args: string[], options: StartOptions<T>): Promise<Running<T>> {
  const parse = options.ready ?? ((line: string) => (line.startsWith("{") ? (JSON.parse(line) as T) : undefined));
  hookExit();
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: options.env ?? process.env });
  live.add(child);
  child.on("exit", () => live.delete(child));
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    let buffered = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`${options.name}: ${why}${stderr ? `; stderr: ${stderr.trim().slice(-1500)}` : ""}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${options.timeoutMs ?? 15_000} ms`), options.timeoutMs ?? 15_000);
    child.on("exit", (code, signal) => fail(`exited (${signal ?? code}) before it was ready`));
    child.on("error", (error) => fail(error.message));
    child.stdout!.on("data", function onData(chunk: Buffer) {
      buffered += chunk.toString();
      for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        let ready: T | undefined;
        try {
          ready = parse(line);
        } catch {
          ready = undefined;
        }
        if (ready === undefined) continue;
        clearTimeout(timer);
        child.removeAllListeners("exit");
        child.on("exit", () => live.delete(child));
        child.stdout!.off("data", onData);
        child.stdout!.resume();
        resolve({ pid: child.pid!, ready, stop: () => stopChild(child) });
        return;
      }
    });
  });
}

/** Runs a command to completion and returns its stdout; rejects with its stderr when it fails. */
export function runToEnd(command: string, args: string[], options: { timeoutMs: number; onSpawn?: (pid: number) => void }): Promise<string> {
  hookExit();
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  if (child.pid) options.onSpawn?.(child.pid);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${command} exited (${signal ?? code}): ${stderr.trim().slice(-1500) || stdout.trim().slice(-500)}`));
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
  await exited;
  clearTimeout(timer);
}

const TICKS_PER_SECOND = 100;

/** CPU time (user + system) a process has used so far, in seconds; 0 when it is gone or /proc is absent. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The pids of this process's children whose command name is `name` (e.g. the workerd Miniflare starts). */
export function childPids(name: string): number[] {
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return pids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm === name && ppid === process.pid) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Whether `command` is on the PATH. */
export function hasCommand(command: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
}

/**
 * Makes sure `command` exists, installing Debian's `pkg` with apt-get when it does not (the bench
 * runs as root on Debian here). Returns what happened, for the report; never throws.
 */
export async function ensureCommand(command: string, pkg: string, log: (line: string) => void): Promise<{ ok: boolean; note: string }> {
  if (hasCommand(command)) return { ok: true, note: `${command} found on the PATH` };
  if (!hasCommand("apt-get")) return { ok: false, note: `${command} is not installed and apt-get is not available` };
  log(`${command} missing: apt-get install -y ${pkg}`);
  const install = () => runToEnd("apt-get", ["install", "-y", "--no-install-recommends", pkg], { timeoutMs: 240_000 });
  try {
    await install();
  } catch {
    try {
      log("apt-get install failed; apt-get update, then again");
      await runToEnd("apt-get", ["update"], { timeoutMs: 240_000 });
      await install();
    } catch (error) {
      return { ok: false, note: `${command} could not be installed with apt-get: ${(error as Error).message.slice(0, 300)}` };
    }
  }
  return hasCommand(command) ? { ok: true, note: `${command} installed with apt-get (${pkg})` } : { ok: false, note: `apt-get installed ${pkg} but ${command} is still missing` };
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
