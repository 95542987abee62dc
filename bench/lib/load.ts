/** Closed-loop HTTP load on loopback with wrk (C) or autocannon (Node), behind one interface. */
import { writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { childScript } from "./build";
import { WORK } from "./paths";
import { cpuSeconds, ensureCommand, runToEnd } from "./processes";

/** One load run: `connections` keep-alive connections sending GET `path` back to back for `seconds`. */
export interface LoadOptions {
  /** the server, e.g. http://127.0.0.1:40123 */
  url: string;
  path: string;
  connections: number;
  seconds: number;
  /**
   * `CF-Connecting-IP` per request: 0 sends none; n cycles through n distinct addresses
   * (10.0.0.1, 10.0.0.2, …), so 1 is a single hot key.
   */
  ips: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  /** completed requests per second */
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  /** answered with a status outside 200–399 */
  non2xx: number;
  /** connect, read, write errors and timeouts */
  errors: number;
  /** CPU the generator itself used, seconds */
  generatorCpuS: number;
}

export interface LoadGenerator {
  name: string;
  run(options: LoadOptions): Promise<LoadResult>;
}

/** The `n`th client address (0-based) of {@link LoadOptions.ips}. */
export function clientIp(n: number): string {
  const k = n + 1;
  return `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`;
}

/**
 * Sends one request from every client address, `connections` at a time, so that every key the
 * traffic uses exists before it is measured: `options.ips` requests in all. Each run of a
 * generator starts its cycle of addresses afresh, so a short run alone reaches only the first few
 * hundred when each of them waits for a cold key.
 */
export async function touchEveryAddress(options: LoadOptions): Promise<void> {
  let next = 0;
  const client = async () => {
    while (next < options.ips) {
      const response = await fetch(`${options.url}${options.path}`, { headers: { "CF-Connecting-IP": clientIp(next++) } });
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.connections, options.ips) }, client));
}

/**
 * wrk, one thread. A Lua script prepares one request per address up front and cycles through
 * them, and prints the summary as JSON.
 */
export function wrk(): LoadGenerator {
  return {
    name: "wrk",
    async run(options) {
      const script = await wrkScript();
      let pid = 0;
      let cpu = 0;
      const poll = setInterval(() => (cpu = Math.max(cpu, cpuSeconds(pid))), 100);
      try {
        const out = await runToEnd(
          "wrk",
          ["-t1", `-c${options.connections}`, `-d${Math.max(1, Math.round(options.seconds))}s`, "--timeout", "10s", "-s", script, options.url, "--", String(options.ips), options.path],
          { timeoutMs: (options.seconds + 30) * 1000, onSpawn: (p) => (pid = p) },
        );
        const line = out.split("\n").find((l) => l.startsWith("WRKJSON "));
        if (!line) throw new Error(`wrk printed no summary: ${out.slice(-500)}`);
        const s = JSON.parse(line.slice("WRKJSON ".length)) as Record<string, number>;
        const seconds = s.duration_us! / 1e6;
        return {
          requests: s.requests!,
          seconds,
          rps: s.requests! / seconds,
          p50Ms: s.p50! / 1000,
          p90Ms: s.p90! / 1000,
          p99Ms: s.p99! / 1000,
          non2xx: s.status!,
          errors: s.connect! + s.read! + s.write! + s.timeout!,
          generatorCpuS: cpu,
        };
      } finally {
        clearInterval(poll);
      }
    },
  };
}

const WRK_LUA = `-- bench: cycles through prepared requests, one per client address; prints a JSON summary.
local requests = {}
local i = 0
function init(args)
  local ips = tonumber(args[1]) or 0
  local path = args[2] or "/"
  if ips == 0 then
    requests[1] = wrk.format("GET", path)
  else
    for n = 1, ips do
      local ip = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
      requests[n] = wrk.format("GET", path, { ["CF-Connecting-IP"] = ip })
    end
  end
end
function request()
  i = i + 1
  if i > #requests then i = 1 end
  return requests[i]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
`;

async function wrkScript(): Promise<string> {
  const path = join(WORK, "wrk-bench.lua");
  await mkdir(WORK, { recursive: true });
  await writeFile(path, WRK_LUA);
  return path;
}

/** autocannon in its own Node process (so it does not share an event loop with anything measured). */
export function autocannon(): LoadGenerator {
  return {
    name: "autocannon",
    async run(options) {
      const out = await runToEnd(process.execPath, [await childScript(), "autocannon", JSON.stringify(options)], { timeoutMs: (options.seconds + 30) * 1000 });
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (!line) throw new Error(`autocannon printed no summary: ${out.slice(-500)}`);
      return JSON.parse(line) as LoadResult;
    },
  };
}

/**
 * The generator the bench uses: wrk when it is installed or can be (apt-get), because on two cores
 * it takes several times less CPU per request than autocannon and so steals less from the servers
 * measured (the end-to-end section measures both); autocannon otherwise.
 */
export async function pickGenerator(log: (line: string) => void): Promise<{ generator: LoadGenerator; note: string }> {
  const found = await ensureCommand("wrk", "wrk", log);
  if (found.ok) return { generator: wrk(), note: found.note };
  return { generator: autocannon(), note: `${found.note}; using autocannon` };
}
