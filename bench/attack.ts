/**
 * Attack: what a client rotating API keys costs the operator in Durable Object calls, rows and
 * dollars per million of its requests, now and at the commit before issue 11 fixed it (built from
 * git), on the multi-isolate harness.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleWorker, type Bundle } from "../test/harness/bundle";
import { startCluster } from "../test/harness/cluster";
import { ROOT } from "../test/harness/root";
import { startOrigin } from "../test/setup/origin-server";
import { PRICES } from "./cost";
import type { RunOptions, Section, Verdict } from "./lib/section";
import { table } from "./lib/stats";

/** The last commit before the fix: every call a rotating key made then, it made here. */
export const BEFORE_COMMIT = "1e07c32";

const ISOLATES = 2;
const CONCURRENCY = 8;

interface Scenario {
  id: string;
  label: string;
  rules: unknown[];
  /** the address of request i */
  ip(i: number): string;
  /** what the commit before the fix cannot parse */
  nowOnly?: boolean;
}

const perIp = { name: "atk-ip", key: "ip", limit: 10, period: "1m" };
const perKey = { name: "atk-key", key: "header:x-api-key", limit: 100, period: "1m" };

const SCENARIOS: Scenario[] = [
  { id: "limited-ip", label: "one IP over its per-IP limit, a new API key per request", rules: [perIp, perKey], ip: () => "198.51.100.7" },
  { id: "rotating", label: "a new IP and API key per request (per-key rule only)", rules: [perKey], ip: address },
  {
    id: "rotating-capped",
    label: "the same, the per-key rule with newKeysPerSecond: 20",
    rules: [{ ...perKey, newKeysPerSecond: 20 }],
    ip: address,
    nowOnly: true,
  },
];

interface Line {
  scenario: string;
  version: "before" | "now";
  requests: number;
  admitted: number;
  calls: Record<string, number>;
  callsPerRequest: number;
  /** objects that stored a first state: each also costs an alarm invocation and the rows it deletes */
  objectsPerRequest: number;
  rowsPerRequest: number;
  seconds: number;
  dollarsPerMillion: number;
}

export interface AttackData {
  before: { commit: string; built: boolean; why?: string };
  requests: number;
  lines: Line[];
}

export async function run(options: RunOptions): Promise<Section> {
  const requests = options.tiny ? 40 : options.quick ? 300 : 2_000;
  const origin = await startOrigin();
  const before = await bundleAt(BEFORE_COMMIT).catch((error: unknown) => error as Error);
  const lines: Line[] = [];
  try {
    for (const scenario of SCENARIOS) {
      const versions: ["before" | "now", Bundle | undefined][] = [["now", undefined]];
      if (!scenario.nowOnly && !(before instanceof Error)) versions.unshift(["before", before]);
      for (const [version, bundle] of versions) {
        options.log(`attack: ${scenario.id}, ${version}`);
        lines.push(await measure(scenario, version, bundle, requests, `http://127.0.0.1:${origin.port}`));
      }
    }
  } finally {
    await origin.close();
  }
  const data: AttackData = {
    before: before instanceof Error ? { commit: BEFORE_COMMIT, built: false, why: before.message } : { commit: BEFORE_COMMIT, built: true },
    requests,
    lines,
  };
  return { id: "attack", title: "Attack", markdown: report(data), charts: [], data, verdicts: verdicts(data), headline: headline(data) };
}

/** The Worker as it was at `commit`: its src/ extracted from git into a scratch folder and bundled. */
async function bundleAt(commit: string): Promise<Bundle> {
  const dir = await mkdtemp(join(tmpdir(), "floodgate-before-"));
  try {
    const archive = execFileSync("git", ["archive", commit, "src"], { cwd: ROOT, maxBuffer: 64 << 20 });
    execFileSync("tar", ["-x", "-C", dir], { input: archive });
    return await bundleWorker(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function measure(scenario: Scenario, version: "before" | "now", bundle: Bundle | undefined, requests: number, originUrl: string): Promise<Line> {
  const cluster = await startCluster({ isolates: ISOLATES, rules: scenario.rules, originUrl, ...(bundle ? { bundle } : {}) });
  try {
    let next = 0;
    let admitted = 0;
    const started = Date.now();
    const worker = async () => {
      for (let i = next++; i < requests; i = next++) {
        const headers = { "CF-Connecting-IP": scenario.ip(i), "x-api-key": `${scenario.id}-${version}-${i}` };
        const response = await cluster.fetch(i % ISOLATES, `/attack/${scenario.id}/${i}`, { headers });
        await response.body?.cancel();
        if (response.status === 200) admitted++;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (Date.now() - started) / 1000;
    // Refunds and syncs run after the responses, in waitUntil.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const texts = await Promise.all(cluster.fronts.map((_, i) => cluster.metrics(i)));
    return line(scenario.id, version, requests, admitted, seconds, texts);
  } finally {
    await cluster.dispose();
  }
}

function line(scenario: string, version: "before" | "now", requests: number, admitted: number, seconds: number, metricTexts: string[]): Line {
  const calls: Record<string, number> = {};
  let admittedPerKey = 0;
  let overflowed = 0;
  for (const text of metricTexts) {
    for (const [, method, value] of text.matchAll(/^floodgate_durable_object_calls_total\{method="(\w+)"\} (\d+)$/gm)) {
      calls[method!] = (calls[method!] ?? 0) + Number(value);
    }
    admittedPerKey += sample(text, 'floodgate_decisions_total{decision="allowed",rule="atk-key"}');
    overflowed += sample(text, 'floodgate_key_overflows_total{rule="atk-key"}');
  }
  // Every key is new: each request admitted under its own key is an object's first write; those under #overflow share one object.
  const firstWrites = Math.min(admittedPerKey, requests - overflowed) + (overflowed > 0 ? 1 : 0);
  const total = Object.values(calls).reduce((a, b) => a + b, 0);
  // A first write makes the object's table (two rows, as workerd's rowsWritten counts it), stores the
  // state and sets an alarm; the alarm later runs and deletes the row. Any other admission or refund writes the state again.
  const rows = 5 * firstWrites + (admittedPerKey - Math.min(admittedPerKey, firstWrites)) + (calls.refund ?? 0);
  const doRequests = total + firstWrites;
  const dollars = (doRequests * PRICES.doRequestPerMillion + rows * PRICES.rowWrittenPerMillion) / requests;
  return {
    scenario,
    version,
    requests,
    admitted,
    calls,
    callsPerRequest: total / requests,
    objectsPerRequest: firstWrites / requests,
    rowsPerRequest: rows / requests,
    seconds,
    dollarsPerMillion: dollars,
  };
}

/** One Prometheus sample's value, 0 when the series is absent. */
function sample(metrics: string, series: string): number {
  const found = metrics.split("\n").find((l) => l.startsWith(`${series} `));
  return found ? Number(found.slice(series.length + 1)) : 0;
}

function address(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

const find = (d: AttackData, scenario: string, version: "before" | "now") => d.lines.find((l) => l.scenario === scenario && l.version === version);

function verdicts(d: AttackData): Verdict[] {
  const before = find(d, "limited-ip", "before");
  const limited = find(d, "limited-ip", "now");
  const capped = find(d, "rotating-capped", "now");
  const ratio = before && limited ? before.callsPerRequest / Math.max(limited.callsPerRequest, 1e-9) : undefined;
  const objects = capped ? Math.round(capped.objectsPerRequest * capped.requests) : undefined;
  // The cap's burst, then its rate over the run, on each isolate; #overflow is one more object.
  const allowance = capped ? Math.ceil(20 * ISOLATES * (1 + capped.seconds)) + 1 : undefined;
  return [
    {
      target: `a rotating-key client over its per-IP limit: at least 10× fewer object calls per request than at ${d.before.commit}`,
      measured: ratio === undefined ? "not measured (no build of the commit before)" : `${ratio >= 100 ? Math.round(ratio) : ratio.toFixed(1)}× fewer (${limited!.callsPerRequest.toFixed(3)} against ${before!.callsPerRequest.toFixed(2)})`,
      met: ratio === undefined ? undefined : ratio >= 10,
      ...(ratio !== undefined && ratio < 10 ? { why: "the calls left are those made before each isolate learned of the denial: the first requests, in flight together" } : {}),
    },
    {
      target: "newKeysPerSecond: 20 creates at most 20 new objects per isolate per second (its burst of 20, then its rate)",
      measured: capped ? `${objects} new objects for ${capped.requests} new keys in ${capped.seconds.toFixed(1)} s on ${ISOLATES} isolates (allowance ${allowance})` : "not measured",
      met: capped ? objects! <= allowance! : undefined,
    },
  ];
}

function headline(d: AttackData): string {
  const before = find(d, "limited-ip", "before");
  const now = find(d, "limited-ip", "now");
  if (!now) return "The attack part did not run.";
  const was = before ? ` (was ${before.callsPerRequest.toFixed(2)} calls and $${before.dollarsPerMillion.toFixed(2)} at ${d.before.commit})` : "";
  return `A client over its per-IP limit rotating API keys costs ${now.callsPerRequest.toFixed(3)} Durable Object calls and $${now.dollarsPerMillion.toFixed(3)} per million requests${was}, against the Worker's own $${PRICES.workerRequestPerMillion.toFixed(2)}.`;
}

function report(d: AttackData): string {
  const rows = d.lines.map((l) => {
    const scenario = SCENARIOS.find((s) => s.id === l.scenario)!;
    const methods = Object.entries(l.calls).map(([m, n]) => `${m} ${n}`).join(", ") || "none";
    return [scenario.label, l.version === "before" ? `before (${d.before.commit})` : "now", String(l.requests), String(l.admitted), methods, l.callsPerRequest.toFixed(3), l.objectsPerRequest.toFixed(3), l.rowsPerRequest.toFixed(2), `$${l.dollarsPerMillion.toFixed(3)}`];
  });
  const notBuilt = d.before.built ? "" : `\n\nThe commit before the fix (${d.before.commit}) could not be built here (${d.before.why}), so only the current figures are shown.`;
  return [
    `A client sends ${d.requests} requests through ${ISOLATES} isolates, ${CONCURRENCY} at a time, each with an \`x-api-key\` never seen before. ` +
      `Rules: \`atk-ip\` (strict, 10 per minute per IP) and \`atk-key\` (strict, 100 per minute per API key); the per-key rule alone in the rotating-IP rows. ` +
      `"Before" is the Worker built from commit ${d.before.commit}, the last before this fix, run on the same harness.`,
    "",
    table(["scenario", "version", "requests", "admitted", "object calls", "calls / request", "new objects / request", "rows written / request", "$ per million requests"], rows, ["l", "l", "r", "r", "l", "r", "r", "r", "r"]),
    "",
    `Dollars are Durable Object requests at $${PRICES.doRequestPerMillion} per million and SQLite rows written at $${PRICES.rowWrittenPerMillion} per million ` +
      `(Workers Paid, beyond the included amounts): every call counted, plus for each new object its alarm's invocation, and the rows of its table's making (two), its first state, its alarm and its deletion; a refund writes one row. Rows are counted from the object's code, the same way for both versions: the version before also made a second table, two rows more per new object. ` +
      `The Worker's own request costs $${PRICES.workerRequestPerMillion} per million on top, in every row. ` +
      `With newKeysPerSecond, keys new past the cap are counted together under the rule's \`#overflow\` key, one object (its own limit of 100 per minute then denies them, from each isolate's cache); the new-object column counts it once.${notBuilt}`,
    "",
    "**Reproduce.** `npm run bench -- --only attack` (about half a minute).",
  ].join("\n");
}
