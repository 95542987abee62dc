// Runs floodgate under `wrangler dev` for a test: on loopback, with chosen vars and persistence directory, stopped with SIGTERM.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { startOrigin } from "../setup/origin-server";
import { ROOT } from "./root";

/** What {@link startWranglerDev} runs. */
export interface WranglerDevOptions {
  /** `--persist-to`: where Durable Object state is kept between runs */
  persistTo: string;
  /** `--var NAME:VALUE` for each entry; they win over wrangler.toml's [vars] */
  vars: Record<string, string>;
  /** how long to wait for the first answer; default 30 s */
  readyTimeoutMs?: number;
}

/** A running `wrangler dev`; call {@link stop} (or {@link kill} in a cleanup) when done. */
export interface WranglerDev {
  /** where it listens, e.g. http://127.0.0.1:41733/ */
  url: URL;
  /** Sends a request to it; a path is resolved against {@link url}. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** What wrangler and workerd wrote, stdout and stderr interleaved. */
  output(): string;
  /** Stops it as Ctrl-C would: SIGTERM, then waits until wrangler and everything it started have exited. */
  stop(): Promise<void>;
  /** Kills whatever is left of it at once (SIGKILL to its process group); safe to call at any time. */
  kill(): Promise<void>;
}

const WRANGLER = join(ROOT, "node_modules/wrangler/wrangler-dist/cli.js");

/** A TCP port nothing listens on right now, on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (address === null || typeof address === "string") throw new Error("freePort: no port assigned");
  return address.port;
}

/**
 * Starts `wrangler dev` with the repository's wrangler.toml, listening on a free port on 127.0.0.1
 * (its inspector on another), and resolves once floodgate answers. wrangler runs in its own
 * process group, so {@link WranglerDev.kill} reaches workerd too.
 *
 * @example
 * const dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: "demo", RATE_LIMIT_RULES: "[]" } });
 * try {
 *   await dev.fetch("/hello");
 * } finally {
 *   await dev.kill();
 * }
 */
export async function startWranglerDev(options: WranglerDevOptions): Promise<WranglerDev> {
  // freePort's ports are free when chosen, not reserved: another test's workerd may bind one first.
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(options);
    } catch (error) {
      if (attempt === PORT_ATTEMPTS || !(error instanceof PortTakenError)) throw error;
    }
  }
}

/** How many times {@link startWranglerDev} picks fresh ports when one it chose was taken meanwhile. */
const PORT_ATTEMPTS = 3;

class PortTakenError extends Error {}

async function launch(options: WranglerDevOptions): Promise<WranglerDev> {
  const { persistTo, vars, readyTimeoutMs = 30_000 } = options;
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const args = [
    "--no-warnings",
    "--experimental-vm-modules",
    WRANGLER,
    "dev",
    "--ip", "127.0.0.1",
    "--port", String(port),
    "--inspector-port", String(inspectorPort),
    "--persist-to", persistTo,
    "--show-interactive-dev-session=false",
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
  });
  // If this process ends before the test's cleanup runs, the group dies with it.
  const killOnExit = () => groupAlive(child) && process.kill(-child.pid!, "SIGKILL");
  process.once("exit", killOnExit);
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, "exit").then(() => void process.off("exit", killOnExit));
  const url = new URL(`http://127.0.0.1:${port}/`);
  const dev: WranglerDev = {
    url,
    fetch: (path, init) => fetch(new URL(path, url), init),
    output: () => output,
    stop: () => stop(child, exited),
    kill: () => kill(child, exited),
  };
  try {
    await ready(dev, child, readyTimeoutMs);
  } catch (error) {
    await dev.kill();
    const Failure = output.includes("Address already in use") ? PortTakenError : Error;
    throw new Failure(`wrangler dev did not start: ${error instanceof Error ? error.message : String(error)}\n${output.slice(-2_000)}`);
  }
  return dev;
}

/**
 * Resolves once wrangler says it listens on the port and floodgate answers anything there; the
 * admin path consumes no quota. An answer alone is not enough: when another test's server took the
 * port between its choice and wrangler's bind, that server answered, wrangler exited on the taken
 * address, and the test went on talking to the other, which reset its connections as it stopped.
 */
async function ready(dev: WranglerDev, child: ChildProcess, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  const listening = `Ready on ${dev.url.origin}`;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`it exited (${child.exitCode ?? child.signalCode})`);
    if (!dev.output().replace(/\x1b\[[0-9;]*m/g, "").includes(listening)) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      continue;
    }
    try {
      const response = await dev.fetch("/__floodgate/ready", { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`no answer within ${timeoutMs} ms`);
}

async function stop(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (groupAlive(child)) process.kill(child.pid!, "SIGTERM");
  const stopped = await Promise.race([exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 15_000))]);
  if (!stopped) {
    await kill(child, exited);
    throw new Error("wrangler dev did not exit within 15 s of SIGTERM");
  }
  // wrangler stops workerd before it exits; anything of the group still running is waited for briefly.
  for (let i = 0; i < 50 && groupAlive(child); i++) await new Promise((resolve) => setTimeout(resolve, 100));
  if (groupAlive(child)) {
    await kill(child, exited);
    throw new Error("wrangler dev exited but left processes behind");
  }
}

async function kill(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (!groupAlive(child)) return;
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    // already gone
  }
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
}

/** Whether any process of the child's group is still running (the group's id is the child's pid). */
function groupAlive(child: ChildProcess): boolean {
  if (child.pid === undefined) return false;
  try {
    process.kill(-child.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A real origin and one `wrangler dev` in front of it with `rules`, as a file's tests share them. */
export interface DevWithOrigin {
  readonly dev: WranglerDev;
  readonly originUrl: string;
}

/**
 * Starts a real origin and `wrangler dev` with `rules` before the file's tests, and stops both
 * (and removes the persistence directory) after them.
 */
export function useWranglerDevWithOrigin(name: string, rules: unknown[]): DevWithOrigin {
  let dev: WranglerDev | undefined;
  let dir: string | undefined;
  let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;
  beforeAll(async () => {
    origin = await startOrigin();
    dir = await mkdtemp(join(tmpdir(), `floodgate-${name}-`));
    dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: originUrlOf(origin), RATE_LIMIT_RULES: JSON.stringify(rules) } });
  }, 60_000);
  afterAll(async () => {
    await dev?.kill();
    await origin?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return {
    get dev() {
      if (!dev) throw new Error("wrangler dev is not running: use it inside a test");
      return dev;
    },
    get originUrl() {
      if (!origin) throw new Error("the origin is not running: use it inside a test");
      return originUrlOf(origin);
    },
  };
}

export function originUrlOf(origin: { port: number }): string {
  return `http://127.0.0.1:${origin.port}`;
}

/** When each request under `/<tag>/` reached the origin at `originUrl`, oldest first. */
export async function arrivals(originUrl: string, tag: string): Promise<number[]> {
  const log = (await (await fetch(`${originUrl}/__origin/log?tag=${tag}`)).json()) as { at: number }[];
  return log.map((r) => r.at).sort((a, b) => a - b);
}
