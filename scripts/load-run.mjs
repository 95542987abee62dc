#!/usr/bin/env node
// Load run: floodgate under `wrangler dev` on loopback in front of a real origin that counts what
// arrives, driven by autocannon at 200 connections. Prints a markdown table; exits 1 if a check fails.
//
//   node scripts/load-run.mjs [--connections 200] [--requests N] [--cases strict-global,fast-ip] (--help lists them)
//
// Not part of `npm test`: it takes a couple of minutes and all of the machine.
import autocannon from "autocannon";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = join(ROOT, "node_modules/wrangler/wrangler-dist/cli.js");

/** Client addresses for the per-IP cases, sent round-robin in CF-Connecting-IP. */
const IPS = Array.from({ length: 100 }, (_, i) => `198.51.${100 + (i >> 8)}.${i & 255}`);

// Periods of an hour: each run lasts well under a minute, so all of it falls in one window and
// "exactly the limit" is a plain count. The script says so when a run does cross a boundary.
// `bare` matches no rule: every request goes to the origin, which shows what wrangler dev itself
// carries here. Strict per-IP makes an object call for nearly every request (requests for 100
// keys seldom share a batch), so it runs fewer requests to keep the whole run near 3 minutes.
const PERIOD_MS = 3_600_000;
const CASES = [
  { name: "bare", requests: 2_000, ips: false, rule: null },
  { name: "strict-global", requests: 50_000, ips: false, rule: { key: "global", limit: 1_000, period: "1h" } },
  { name: "fast-global", requests: 50_000, ips: false, rule: { key: "global", limit: 1_000, period: "1h", mode: "fast" } },
  { name: "fast-ip", requests: 50_000, ips: true, rule: { key: "ip", limit: 50, period: "1h", mode: "fast" } },
  { name: "strict-ip", requests: 10_000, ips: true, rule: { key: "ip", limit: 20, period: "1h" } },
];
const RULES = CASES.filter((c) => c.rule).map((c) => ({ name: c.name, match: { path: `/${c.name}/*` }, ...c.rule }));

const USAGE = `usage: node scripts/load-run.mjs [--connections <n>] [--requests <n>] [--cases <name>,<name>…]
  --connections  autocannon's connections (default 200)
  --requests     requests per case, instead of each case's own count
  --cases        runs only these: ${CASES.map((c) => c.name).join(", ")}
  --help         this text`;

/** The options, or the line to refuse them with: checked before anything starts, since a run takes minutes. */
function readFlags(args) {
  let values;
  try {
    ({ values } = parseArgs({ args, options: { requests: { type: "string" }, connections: { type: "string", default: "200" }, cases: { type: "string" }, help: { type: "boolean" } } }));
  } catch (error) {
    const unknown = /Unknown option '([^']+)'/.exec(error.message);
    return unknown ? `${unknown[1]}: unknown option; the options are --connections, --requests, --cases and --help` : error.message;
  }
  if (values.help) return values;
  const positive = (name) => (/^[1-9]\d*$/.test(values[name]) ? undefined : `--${name}: expected a positive integer, got ${JSON.stringify(values[name])}`);
  const bad = positive("connections") ?? (values.requests !== undefined ? positive("requests") : undefined);
  if (bad) return bad;
  const unknownCases = (values.cases?.split(",") ?? []).filter((name) => !CASES.some((c) => c.name === name));
  if (unknownCases.length > 0) return `--cases: no case named ${unknownCases.map((n) => JSON.stringify(n)).join(", ")}; the cases are ${CASES.map((c) => c.name).join(", ")}`;
  return values;
}

const flags = readFlags(process.argv.slice(2));
if (typeof flags === "string") {
  console.error(`load-run: ${flags}\nrun \`node scripts/load-run.mjs --help\` for the options`);
  process.exit(2);
}
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}
/** --requests overrides every case's own count. */
const requestsOf = (c) => (flags.requests ? Number(flags.requests) : c.requests);
const CONNECTIONS = Number(flags.connections);

/**
 * The origin: counts arrivals per case (`/<case>/…`) and per case and client (`/<case>/<ip>`).
 * The address travels in the path because the runtime does not pass CF-Connecting-IP on to the origin.
 */
async function startOrigin() {
  const arrivals = new Map();
  const server = createHttpServer((req, res) => {
    const [, name = "", ip = ""] = (req.url ?? "/").split("/");
    const counts = arrivals.get(name) ?? { total: 0, byIp: new Map() };
    counts.total++;
    counts.byIp.set(ip, (counts.byIp.get(ip) ?? 0) + 1);
    arrivals.set(name, counts);
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "text/plain" }).end("ok\n"));
  });
  // Longer than the runtime keeps an idle pooled connection, as for any origin behind a proxy:
  // Node's default of 5 s races the proxy's reuse of the connection.
  server.keepAliveTimeout = 65_000;
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    arrivals: (name) => arrivals.get(name) ?? { total: 0, byIp: new Map() },
    close: () => new Promise((done) => { server.closeAllConnections(); server.close(done); }),
  };
}

async function freePort() {
  const server = createTcpServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

/** `wrangler dev` as `npm start` runs it, with the origin and rules given as --var, in its own process group. */
async function startWrangler(origin, persistTo) {
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const child = spawn(
    process.execPath,
    [
      "--no-warnings", "--experimental-vm-modules", WRANGLER, "dev",
      "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort),
      "--persist-to", persistTo, "--show-interactive-dev-session=false", "--log-level", "warn",
      "--var", `ORIGIN_URL:${origin}`, "--var", `RATE_LIMIT_RULES:${JSON.stringify(RULES)}`,
    ],
    { cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" } },
  );
  // wrangler runs in its own process group: if this script is stopped, the group goes with it.
  const killGroup = () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // all gone
    }
  };
  process.once("exit", killGroup);
  for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => process.exit(130));
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = once(child, "exit");
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    try {
      process.kill(child.pid, "SIGTERM");
    } catch {
      return;
    }
    const done = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 15_000))]);
    killGroup(); // whatever is left of it
    if (!done) await exited;
  };
  const until = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited:\n${output.slice(-2000)}`);
    try {
      const response = await fetch(`${url}/__floodgate/ready`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      break;
    } catch {
      if (Date.now() > until) {
        await stop();
        throw new Error(`wrangler dev did not answer within 60 s:\n${output.slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return { url, stop, output: () => output };
}

/** The request from the given client address: in CF-Connecting-IP for floodgate, in the path for the origin's count. */
function withIp(request, ip) {
  return { ...request, path: `/${request.path.split("/")[1]}/${ip}`, headers: { ...request.headers, "cf-connecting-ip": ip } };
}

/**
 * Requests the runtime cancelled as hung, in wrangler's output: one cancelled after its response
 * (waiting in its waitUntil) leaves its client answered, so only this line tells of it.
 */
const hungIn = (output) => output.split("\n").filter((line) => line.includes("canceled this request because it detected that your Worker's code had hung")).length;

/** One case: its requests at CONNECTIONS connections, then what came back, what reached the origin and what the runtime cancelled. */
async function runCase(c, wrangler, origin) {
  const { url } = wrangler;
  const logged = wrangler.output().length;
  let next = 0;
  const started = Date.now();
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    amount: requestsOf(c),
    timeout: 10,
    requests: [
      {
        method: "GET",
        path: `/${c.name}/global`,
        ...(c.ips ? { setupRequest: (request) => withIp(request, IPS[next++ % IPS.length]) } : {}),
      },
    ],
  });
  const ended = Date.now();
  // The runtime logs a cancellation a moment after it, up to its 1 s wait for a hung request.
  await new Promise((r) => setTimeout(r, 2_000));
  const hung = hungIn(wrangler.output().slice(logged));
  const status = (code) => Number(result.statusCodeStats?.[code]?.count ?? 0);
  const admitted = status(200);
  const denied = status(429);
  const answered = Object.values(result.statusCodeStats ?? {}).reduce((sum, s) => sum + Number(s.count), 0);
  const errors = answered - admitted - denied + result.errors + result.timeouts;
  const arrived = origin.arrivals(c.name);
  const oneWindow = Math.floor(started / PERIOD_MS) === Math.floor(ended / PERIOD_MS);
  const keys = c.ips ? IPS.length : 1;
  const perKey = c.ips ? IPS.map((ip) => arrived.byIp.get(ip) ?? 0) : [arrived.total];
  const limit = c.rule?.limit ?? Number.POSITIVE_INFINITY;
  const checks = [];
  if (errors !== 0) checks.push(`${errors} errors`);
  if (hung !== 0) checks.push(`${hung} cancelled as hung`);
  if (arrived.total !== admitted) checks.push(`origin saw ${arrived.total}, ${admitted} admitted`);
  // Within one window no key gets more than its limit; strict is exact: every key, having asked
  // for more than its limit, got exactly its limit. A run across a boundary is not held to this.
  if (oneWindow && perKey.some((n) => n > limit)) checks.push(`a key got ${Math.max(...perKey)} > ${limit}`);
  if (c.rule && c.rule.mode !== "fast" && oneWindow && perKey.some((n) => n !== limit)) {
    checks.push(`strict: keys admitted ${Math.min(...perKey)}–${Math.max(...perKey)}, not exactly ${limit}`);
  }
  return {
    name: c.name,
    rule: c.rule ? `${c.rule.mode ?? "strict"}, ${limit}/${c.rule.period} per ${c.ips ? `IP (${keys} IPs)` : "global key"}` : "none (all proxied)",
    requests: result.requests.total,
    seconds: (ended - started) / 1000,
    rps: result.requests.total / ((ended - started) / 1000),
    p50: result.latency.p50,
    p99: result.latency.p99,
    admitted,
    denied,
    errors,
    arrived: arrived.total,
    expected: c.rule ? limit * keys : null,
    perKey: c.rule ? { min: Math.min(...perKey), max: Math.max(...perKey) } : null,
    oneWindow,
    ok: checks.length === 0,
    checks,
  };
}

function table(rows) {
  const out = [
    "| case | rule | requests | req/s | p50 / p99 ms | admitted (200) | denied (429) | errors | origin arrivals | limit × keys | per key | check |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  ];
  const n = (x) => x.toLocaleString("en");
  for (const r of rows) {
    const perKey = r.perKey === null ? "–" : r.perKey.min === r.perKey.max ? n(r.perKey.min) : `${n(r.perKey.min)}–${n(r.perKey.max)}`;
    const check = r.ok ? (r.oneWindow ? "ok" : "ok; crossed a window boundary, limits not checked") : `FAIL: ${r.checks.join("; ")}`;
    out.push(
      `| ${r.name} | ${r.rule} | ${n(r.requests)} | ${n(Math.round(r.rps))} | ${r.p50} / ${r.p99} | ${n(r.admitted)} | ${n(r.denied)} | ${r.errors} | ${n(r.arrived)} | ${r.expected === null ? "–" : n(r.expected)} | ${perKey} | ${check} |`,
    );
  }
  return out.join("\n");
}

async function main() {
  const began = Date.now();
  const origin = await startOrigin();
  const persistTo = await mkdtemp(join(tmpdir(), "floodgate-load-"));
  let wrangler;
  const rows = [];
  try {
    wrangler = await startWrangler(origin.url, persistTo);
    // One request per case first, so the runs measure floodgate, not the first compile.
    for (const c of CASES) await (await fetch(`${wrangler.url}/warm-up/${c.name}`)).arrayBuffer();
    const chosen = flags.cases ? CASES.filter((c) => flags.cases.split(",").includes(c.name)) : CASES;
    for (const c of chosen) {
      process.stderr.write(`${c.name}: ${requestsOf(c)} requests at ${CONNECTIONS} connections…\n`);
      rows.push(await runCase(c, wrangler, origin));
    }
  } finally {
    await wrangler?.stop();
    await origin.close();
    await rm(persistTo, { recursive: true, force: true });
  }
  console.log(`floodgate load run: wrangler dev on 127.0.0.1, a Node origin on loopback, autocannon at ${CONNECTIONS} connections (${new Date().toISOString()})\n`);
  console.log(table(rows));
  console.log(`\n${rows.reduce((sum, r) => sum + r.requests, 0).toLocaleString("en")} requests in ${Math.round((Date.now() - began) / 1000)} s, wrangler dev's start included.`);
  if (rows.some((r) => !r.ok)) process.exitCode = 1;
}

await main();
