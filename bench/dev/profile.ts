/** Where one end-to-end case spends its CPU inside workerd: the V8 sampling profiler on the Worker's isolate, read back in terms of src/. */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { SourceMap } from "node:module";
import { basename, dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fetch as miniflareFetch, type WebSocket } from "miniflare";
import { PATH, rule } from "../end-to-end";
import { FLOODGATE_BUNDLE } from "../lib/build";
import { clientIp, wrk, type LoadOptions, type LoadResult } from "../lib/load";
import { startOrigin } from "../lib/origin";
import { ROOT, WORK } from "../lib/paths";
import { cpuSeconds, freePort } from "../lib/processes";
import { byLabel, minus, startWorker, type RunningWorker } from "../lib/workers";

const CASES = ["bare", "fast-hot", "fast-ips", "strict-hot", "strict-ips"] as const;
type Case = (typeof CASES)[number];
const USAGE = `usage: node bench/dev/profile.mjs <${CASES.join("|")}> [--seconds 8] [--connections 16] [--interval 100] [--no-profile]`;
/** distinct client addresses in the per-IP cases, as in the end-to-end part */
const IPS = 1000;
const WARMUP_SECONDS = 3;
const OUT = join(WORK, "profile");
/** rows per table */
const TOP = 25;

interface Options {
  kind: Case;
  seconds: number;
  connections: number;
  /** sampling interval, µs */
  interval: number;
  profile: boolean;
}

/** Profiles one case (see bench/README.md, "Profiling a case"); `args` as on the command line. */
export async function main(args: string[]): Promise<void> {
  const options = parse(args);
  const origin = await startOrigin();
  try {
    const inspectorPort = options.profile ? await freePort() : undefined;
    const mode = options.kind === "bare" ? undefined : options.kind.startsWith("fast") ? "fast" : "strict";
    const worker = await startWorker(mode ? "floodgate" : "bare", { originUrl: origin.url, rules: mode && [rule(mode)], inspectorPort });
    try {
      const report = await measure(worker, options, inspectorPort);
      console.log(report);
      await mkdir(OUT, { recursive: true });
      await writeFile(join(OUT, `${options.kind}.txt`), `${report}\n`);
    } finally {
      await worker.dispose();
    }
  } finally {
    await origin.stop();
  }
}

function parse(args: string[]): Options {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { seconds: { type: "string" }, connections: { type: "string" }, interval: { type: "string" }, "no-profile": { type: "boolean" } },
  });
  const kind = positionals[0] as Case;
  const number = (text: string | undefined, fallback: number) => {
    const n = Number(text ?? fallback);
    if (!(n > 0)) throw new Error(`not a positive number: ${text}\n${USAGE}`);
    return n;
  };
  if (positionals.length !== 1 || !CASES.includes(kind)) throw new Error(USAGE);
  return { kind, seconds: number(values.seconds, 8), connections: number(values.connections, 16), interval: number(values.interval, 100), profile: !values["no-profile"] };
}

/** Warms the Worker up, then loads it for `options.seconds`: the report's text, with the profile's summary when profiling. */
async function measure(worker: RunningWorker, options: Options, inspectorPort: number | undefined): Promise<string> {
  const load: LoadOptions = { url: worker.url, path: PATH, connections: options.connections, seconds: options.seconds, ips: options.kind.endsWith("-ips") ? IPS : 1 };
  const generator = wrk();
  const cpu = () => (worker.pid ? cpuSeconds(worker.pid) : NaN);
  const calls = (metrics: string) => byLabel(metrics, "floodgate_durable_object_calls_total", "method");
  const session = inspectorPort ? await Session.open(inspectorPort, `core:user:${worker.kind}`) : undefined;
  try {
    await session?.send("Profiler.enable");
    await session?.send("Profiler.setSamplingInterval", { interval: options.interval });
    // Warm up with the profiler already running and throw that profile away: V8 keeps line
    // positions (and inlined callees) only for code it optimizes while a profiler runs; code
    // optimized before would charge every tick to its function's first line.
    await session?.send("Profiler.start");
    await generator.run({ ...load, seconds: WARMUP_SECONDS });
    await session?.send("Profiler.stop");
    await session?.send("Profiler.start");

    const [callsBefore, cpuBefore] = [calls(await worker.metrics()), cpu()];
    const result = await generator.run(load);
    const [callsAfter, cpuAfter] = [calls(await worker.metrics()), cpu()];
    const profile = session ? (await session.send<{ profile: Profile }>("Profiler.stop")).profile : undefined;

    const lines = header(options, load, result, ((cpuAfter - cpuBefore) * 1e6) / result.requests, minus(callsAfter, callsBefore));
    if (profile) {
      const file = join(OUT, `${options.kind}.cpuprofile`);
      await mkdir(OUT, { recursive: true });
      await writeFile(file, JSON.stringify(profile));
      lines.push(...summarise(profile, await sourceMapper(worker), result.requests), "", `profile: ${relative(ROOT, file)} (Chrome DevTools > Performance > Load profile)`);
    }
    return lines.join("\n");
  } finally {
    session?.close();
  }
}

function header(options: Options, load: LoadOptions, result: LoadResult, cpuUsPerRequest: number, calls: Record<string, number>): string[] {
  const traffic = load.ips === 1 ? `one address, ${clientIp(0)}` : `${load.ips.toLocaleString("en-US")} addresses`;
  const perRequest = (n: number) => (n / result.requests).toFixed(n / result.requests < 0.1 ? 4 : 2);
  return [
    `${options.kind}: ${result.requests.toLocaleString("en-US")} requests in ${result.seconds.toFixed(1)} s ` +
      `(${Math.round(result.rps).toLocaleString("en-US")} req/s, ${options.connections} connections, ${traffic}), ${result.non2xx} non-2xx, ${result.errors} errors`,
    `workerd CPU (from /proc, every thread): ${cpuUsPerRequest.toFixed(1)} µs/req${options.profile ? " (with the profiler's own overhead: --no-profile for the figure without)" : ""}`,
    `Durable Object calls per request: ${Object.entries(calls).map(([method, n]) => `${method} ${perRequest(n)}`).join(", ") || "none"}`,
  ];
}

/** A Chrome DevTools protocol session with one of workerd's isolates, over Miniflare's WebSocket client. */
class Session {
  private last = 0;
  private readonly pending = new Map<number, { resolve(result: unknown): void; reject(error: Error): void }>();

  private constructor(private readonly socket: WebSocket) {
    socket.addEventListener("message", (event) => this.receive(String(event.data)));
  }

  /** Attaches to the inspector target whose id is `target` (workerd names a Worker's isolate `core:user:<name>`). */
  static async open(inspectorPort: number, target: string): Promise<Session> {
    const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { id: string; webSocketDebuggerUrl: string }[];
    const found = targets.find((t) => t.id === target);
    if (!found) throw new Error(`no inspector target ${target}; there are ${targets.map((t) => t.id).join(", ")}`);
    // Miniflare's fetch upgrades http:// URLs only; workerd's advertised host may not be loopback.
    const response = await miniflareFetch(`http://127.0.0.1:${inspectorPort}${new URL(found.webSocketDebuggerUrl).pathname}`, { headers: { Upgrade: "websocket" } });
    if (!response.webSocket) throw new Error(`inspector ${target}: HTTP ${response.status}, no WebSocket`);
    response.webSocket.accept();
    return new Session(response.webSocket);
  }

  send<T = unknown>(method: string, params: object = {}): Promise<T> {
    const id = ++this.last;
    this.socket.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve: (result) => resolve(result as T), reject }));
  }

  close(): void {
    this.socket.close();
  }

  private receive(text: string): void {
    const message = JSON.parse(text) as { id?: number; result?: unknown; error?: unknown };
    const waiting = message.id === undefined ? undefined : this.pending.get(message.id);
    if (!waiting) return; // events: none enabled that matter here
    this.pending.delete(message.id!);
    if (message.error) waiting.reject(new Error(JSON.stringify(message.error)));
    else waiting.resolve(message.result);
  }
}

/** V8's CPU profile (the protocol's Profiler.Profile), the fields read here. */
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
  /** self samples per line of the function (1-based lines of its script) */
  positionTicks?: { line: number; ticks: number }[];
}

/** `src/file.ts:line` for a 0-based position in the bundle; `file:line` for any other script. */
type Mapper = (url: string, line: number, column: number) => string;

async function sourceMapper(worker: RunningWorker): Promise<Mapper> {
  const where = (url: string, line: number) => `${basename(url)}:${line + 1}`;
  if (worker.kind !== "floodgate") return where;
  const mapFile = `${FLOODGATE_BUNDLE}.map`;
  const map = new SourceMap(JSON.parse(await readFile(mapFile, "utf8")));
  return (url, line, column) => {
    if (basename(url) !== basename(FLOODGATE_BUNDLE)) return where(url, line);
    const entry = map.findEntry(line, column);
    // findEntry answers the nearest mapping at or before the position, possibly on an earlier line.
    if (!("originalSource" in entry) || entry.generatedLine !== line) return where(url, line);
    return `${relative(ROOT, resolve(dirname(mapFile), entry.originalSource))}:${entry.originalLine + 1}`;
  };
}

/** V8's pseudo-frames for time outside JavaScript; only the garbage collector's counts as in-V8 time. */
const OUTSIDE = new Set(["(root)", "(program)", "(idle)"]);

/**
 * Self, inclusive and per-line time as shares of the in-V8 samples (JavaScript, builtins, native
 * callbacks, GC). Every sample counts the same, the mean interval: weighting each by the gap to the
 * next (as DevTools does) would charge the sampler's own scheduling delays on a busy machine to
 * whatever ran just before them.
 */
function summarise(profile: Profile, where: Mapper, requests: number): string[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const name = (node: ProfileNode) => {
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    if (!url) return functionName.startsWith("(") ? functionName : functionName ? `${functionName} (native)` : "(anonymous native callback)";
    return `${functionName || "(anonymous)"} ${where(url, lineNumber, columnNumber)}`;
  };

  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let inV8 = 0;
  for (const id of profile.samples) {
    const node = byId.get(id)!;
    if (!node.callFrame.url && OUTSIDE.has(node.callFrame.functionName)) continue;
    inV8++;
    add(self, name(node));
    // a recursive function is on the stack once as far as its inclusive time goes; (root), the
    // only frame without a parent, is on every stack
    const onStack = new Set<string>();
    for (let at = id; parent.has(at); at = parent.get(at)!) onStack.add(name(byId.get(at)!));
    for (const frame of onStack) add(inclusive, frame);
  }
  const lines = new Map<string, number>();
  for (const node of profile.nodes) {
    if (!node.callFrame.url) continue; // native code: no lines of its own
    for (const tick of node.positionTicks ?? []) add(lines, `${node.callFrame.functionName || "(anonymous)"} @ ${where(node.callFrame.url, tick.line - 1, Number.MAX_SAFE_INTEGER)}`, tick.ticks);
  }

  const sampleUs = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length);
  const gc = [...self].find(([frame]) => frame === "(garbage collector)")?.[1] ?? 0;
  const table = (title: string, counts: Map<string, number>) => [
    "",
    `${title} (% of in-V8 time, µs/req)`,
    ...[...counts]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([frame, n]) => `${((100 * n) / inV8).toFixed(1).padStart(6)}%  ${((n * sampleUs) / requests).toFixed(2).padStart(7)}  ${frame}`),
  ];
  return [
    `profile: ${profile.samples.length.toLocaleString("en-US")} samples, one per ${sampleUs.toFixed(0)} µs; in V8 ${((inV8 * sampleUs) / requests).toFixed(1)} µs/req, of which GC ${((100 * gc) / Math.max(1, inV8)).toFixed(1)}%`,
    ...table("self", self),
    ...table("inclusive", inclusive),
    ...table("lines, self", lines),
  ];
}

function add(counts: Map<string, number>, key: string, n = 1): void {
  counts.set(key, (counts.get(key) ?? 0) + n);
}
