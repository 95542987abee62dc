/**
 * Cost: dollars per million requests for floodgate strict and fast, from the Durable Object calls
 * counted during the end-to-end runs, at Cloudflare's published prices.
 */
import { measureForCost, type Counted, type EndToEndData, type Summary } from "./end-to-end";
import type { ChartSpec, RunOptions, Section } from "./lib/section";
import { table } from "./lib/stats";

const WORKERS_PRICING = "https://developers.cloudflare.com/workers/platform/pricing/";
const DO_PRICING = "https://developers.cloudflare.com/durable-objects/platform/pricing/";

/** Workers Paid, beyond the included amounts (USD). */
export const PRICES = {
  /** Workers Standard: per million requests beyond 10 M a month; subrequests (including Durable Object calls) are not billed as Worker requests */
  workerRequestPerMillion: 0.3,
  /** Workers Standard: per million CPU milliseconds beyond 30 M a month */
  workerCpuPerMillionMs: 0.02,
  /** Durable Objects: per million requests beyond 1 M a month; every RPC method call on a stub is one request, and so is every alarm invocation */
  doRequestPerMillion: 0.15,
  /** Durable Objects: per million GB-s beyond 400,000 GB-s a month, at 128 MB per object while it is active */
  doDurationPerMillionGbS: 12.5,
  doMemoryGb: 0.128,
  /** SQLite-backed storage: per million rows written beyond 50 M a month; each setAlarm() is one row written, deletes count as writes */
  rowWrittenPerMillion: 1.0,
  /** SQLite-backed storage: per million rows read beyond 25 billion a month */
  rowReadPerMillion: 0.001,
} as const;

/** Assumed wall-clock time an object stays active per call (not measurable locally); the duration line scales with it. */
const ACTIVE_MS_PER_CALL = 1;

/** Rows a call writes, from the object's code (src/durable-object/rate-limiter.ts), when it cannot be counted. */
const ROWS_PER_CALL: Record<string, { rows: number; why: string }> = {
  decide: { rows: 1, why: "a decide call that admits at least one request upserts the key's one state row (every request is admitted here)" },
  sync: { rows: 1, why: "a sync upserts the key's one row, which holds the state and the isolates' leases (a retried sync writes nothing)" },
  refund: { rows: 1, why: "a refund upserts the state row" },
  peek: { rows: 0, why: "a peek reads only" },
  reset: { rows: 1, why: "a reset deletes (deletes count as writes)" },
};

interface Line {
  variant: string;
  label: string;
  requests: number;
  callsPerRequest: Record<string, number>;
  doCallsPerRequest: number;
  rowsPerRequest: number;
  /** extra Worker-side CPU per request over the bare Worker, ms (local, upper bound) */
  extraCpuMsPerRequest: number;
  dollars: { workerRequests: number; workerCpu: number; doRequests: number; rowsWritten: number; doDuration: number; floodgate: number; total: number };
}

export interface CostData {
  source: "end-to-end" | "own-run";
  fastImplemented: boolean;
  prices: typeof PRICES;
  activeMsPerCall: number;
  lines: Line[];
  perKeyPerPeriod: { rowsWritten: number; doRequests: number; dollarsPerMillionKeyPeriods: number };
}

const LABELS: Record<string, string> = {
  "strict-ips": "strict, 1,000 IPs",
  "strict-hot": "strict, 1 hot key",
  "fast-ips": "fast, 1,000 IPs",
  "fast-hot": "fast, 1 hot key",
};

/** The bench part. Reads end-to-end's counters when that part ran first; otherwise counts with a short run of its own. */
export async function run(options: RunOptions & { earlier?: Record<string, Section> }): Promise<Section> {
  let e2e = options.earlier?.["end-to-end"]?.data as EndToEndData | undefined;
  let source: CostData["source"] = "end-to-end";
  if (!e2e?.counters || !Object.keys(e2e.counters).length) {
    options.log("no end-to-end counters at hand: counting with a short run of strict and fast");
    e2e = await measureForCost(options);
    source = "own-run";
  }
  const data = compute(e2e, source);
  return { id: "cost", title: "Cost", markdown: report(data, e2e), charts: charts(data), data, headline: headline(data) };
}

/** What floodgate adds to a million requests, by mode and traffic, in one sentence. */
function headline(d: CostData): string {
  const add = (variant: string) => {
    const line = d.lines.find((l) => l.variant === variant);
    return line ? usd(line.dollars.floodgate) : "—";
  };
  return (
    `Per million requests floodgate adds ${add("fast-ips")} in fast mode and ${add("strict-ips")} in strict with 1,000 per-client keys ` +
    `(${add("fast-hot")} and ${add("strict-hot")} with one hot key), from the Durable Object calls counted, at Cloudflare's prices.`
  );
}

function compute(e2e: EndToEndData, source: CostData["source"]): CostData {
  const cpu = (variant: string) => e2e.summary.find((s: Summary) => s.variant === variant && s.phase === "saturated")?.serverCpuUsPerRequest;
  const bareCpu = cpu("bare");
  const lines: Line[] = [];
  for (const variant of Object.keys(LABELS)) {
    const c: Counted | undefined = e2e.counters[variant];
    if (!c || !c.requests) continue;
    const callsPerRequest = Object.fromEntries(Object.entries(c.durableObjectCalls).map(([method, n]) => [method, n / c.requests]));
    const doCallsPerRequest = Object.values(callsPerRequest).reduce((a, b) => a + b, 0);
    const rowsPerRequest = Object.entries(callsPerRequest).reduce((sum, [method, n]) => sum + n * (ROWS_PER_CALL[method]?.rows ?? 1), 0);
    const mine = cpu(variant);
    const extraCpuMsPerRequest = mine !== undefined && bareCpu !== undefined && Number.isFinite(mine - bareCpu) ? Math.max(0, mine - bareCpu) / 1000 : 0;
    const perMillion = 1e6;
    const doRequests = (doCallsPerRequest * perMillion * PRICES.doRequestPerMillion) / 1e6;
    const rowsWritten = (rowsPerRequest * perMillion * PRICES.rowWrittenPerMillion) / 1e6;
    const doDuration = (doCallsPerRequest * perMillion * PRICES.doMemoryGb * (ACTIVE_MS_PER_CALL / 1000) * PRICES.doDurationPerMillionGbS) / 1e6;
    const workerCpu = (extraCpuMsPerRequest * perMillion * PRICES.workerCpuPerMillionMs) / 1e6;
    const workerRequests = PRICES.workerRequestPerMillion;
    const floodgate = doRequests + rowsWritten + doDuration + workerCpu;
    lines.push({
      variant,
      label: LABELS[variant]!,
      requests: c.requests,
      callsPerRequest,
      doCallsPerRequest,
      rowsPerRequest,
      extraCpuMsPerRequest,
      dollars: { workerRequests, workerCpu, doRequests, rowsWritten, doDuration, floodgate, total: workerRequests + floodgate },
    });
  }
  // An active key's object makes its table (two rows), sets one alarm and runs it about once per
  // period, and deletes its rows when the key recovers: a key active once a period pays all four each period.
  const perKey = { rowsWritten: 4, doRequests: 1 };
  return {
    source,
    fastImplemented: e2e.fastImplemented,
    prices: PRICES,
    activeMsPerCall: ACTIVE_MS_PER_CALL,
    lines,
    perKeyPerPeriod: { ...perKey, dollarsPerMillionKeyPeriods: perKey.rowsWritten * PRICES.rowWrittenPerMillion + perKey.doRequests * PRICES.doRequestPerMillion },
  };
}

function usd(x: number): string {
  if (x === 0) return "$0";
  if (x >= 0.1) return `$${x.toFixed(2)}`;
  if (x >= 0.001) return `$${x.toFixed(4)}`;
  return `$${x.toPrecision(2)}`;
}

function report(d: CostData, e2e: EndToEndData): string {
  const out: string[] = [];
  out.push(
    `Dollars per **million requests** on Workers Paid, beyond the monthly included amounts, at the prices published on [Workers pricing](${WORKERS_PRICING}) ` +
      `(requests $${PRICES.workerRequestPerMillion.toFixed(2)}/M, CPU $${PRICES.workerCpuPerMillionMs.toFixed(2)}/M ms) and [Durable Objects pricing](${DO_PRICING}) ` +
      `(requests — each RPC call and each alarm — $${PRICES.doRequestPerMillion}/M, duration $${PRICES.doDurationPerMillionGbS.toFixed(2)}/M GB-s at 128 MB, ` +
      `SQLite rows written $${PRICES.rowWrittenPerMillion.toFixed(2)}/M, rows read $${PRICES.rowReadPerMillion}/M). ` +
      `Durable Object calls per request are **counted**: floodgate's own \`floodgate_durable_object_calls_total\` counters, read from \`GET /__floodgate/metrics\` before and after every ` +
      `${d.source === "end-to-end" ? "end-to-end run above, its warm-up included (so each key's first sync after a quiet spell counts)" : "run of a short measurement made by this part (the end-to-end part's counters were not available)"} ` +
      `(${e2e.generator}, ${e2e.sizes.connections} connections, one isolate).`,
    "",
  );
  const rows = d.lines.map((l) => [
    l.label,
    l.requests.toLocaleString("en-US"),
    Object.entries(l.callsPerRequest).map(([m, n]) => `${m} ${n.toFixed(4)}`).join(", ") || "none",
    l.rowsPerRequest.toFixed(4),
    usd(l.dollars.doRequests),
    usd(l.dollars.rowsWritten),
    usd(l.dollars.doDuration),
    usd(l.dollars.workerCpu),
    `**${usd(l.dollars.floodgate)}**`,
    usd(l.dollars.total),
  ]);
  out.push(
    table(
      ["floodgate", "requests counted", "DO calls / request", "rows written / request", "DO requests", "rows written", "DO duration", "Worker CPU", "floodgate adds", "total with the Worker request"],
      rows,
      ["l", "r", "l", "r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
    `For comparison, the Worker itself costs ${usd(PRICES.workerRequestPerMillion)} per million requests whatever it does, plus its CPU time.`,
    "",
    "![Cost per million requests](charts/cost-per-million.svg)",
    "",
    "**What is counted and what is assumed.**",
    "",
    "- Counted: Durable Object calls by method (decide, sync, refund, …) per request, during the runs.",
    `- Assumed, from the object's code: rows written per call — ${Object.entries(ROWS_PER_CALL)
      .filter(([, r]) => r.rows > 0)
      .map(([m, r]) => `${m}: ${r.rows} (${r.why})`)
      .join("; ")}. Rows read per request are ~0: the object reads its rows once when it starts and keeps them in memory.`,
    `- Assumed: each call keeps its object active (billed for duration) ${d.activeMsPerCall} ms of wall-clock time; the object does no I/O while deciding, and can hibernate between calls. The duration column scales linearly with this figure, and stays small beside the per-call request price unless calls are held open for tens of ms.`,
    "- Worker CPU: the extra CPU per request of floodgate's workerd over the bare Worker's, measured locally; it includes the Durable Object's own CPU, so it is an upper bound for the Worker's billed CPU.",
    `- Not per request: every active key's object makes its table when it first stores a state (two rows written, as workerd counts a \`CREATE TABLE\`; a fast key's object makes a second for its isolates, two more), sets an alarm (one row written) and runs it (one Durable Object request) about once per period, and deletes its rows when the key recovers (one row written), so a key that recovers between uses makes its table anew: about ${usd(d.perKeyPerPeriod.dollarsPerMillionKeyPeriods)} per million key-periods (a key active for one period), on top of the table. Stored data is one small row per active key (in fast mode it also holds each isolate's last lease), deleted when the key recovers.`,
    "- Strict coalesces concurrent requests for one key in an isolate into one call, so calls per request fall as a key gets hotter (compare the hot key with 1,000 IPs). Fast mode makes calls per key per sync interval per isolate, not per request: its cost per request falls as traffic per key rises, and grows with the number of isolates that see the key — this run had one isolate, production has many.",
  );
  if (!d.fastImplemented) {
    out.push("- **The fast path was not in this build**: the `\"mode\": \"fast\"` rows were decided as strict (no local decisions were counted), so they show strict's cost.");
  }
  return out.join("\n");
}

function charts(d: CostData): ChartSpec[] {
  return [
    {
      file: "cost-per-million",
      title: "Cost per million requests (USD, beyond included usage)",
      kind: "bar",
      xLabel: "floodgate mode and traffic",
      yLabel: "USD per million requests",
      categories: d.lines.map((l) => l.label),
      series: [
        { name: "floodgate adds (Durable Objects, storage, CPU)", points: d.lines.map((l, i): [number, number] => [i, Number(l.dollars.floodgate.toPrecision(3))]) },
        { name: "total with the Worker request", points: d.lines.map((l, i): [number, number] => [i, Number(l.dollars.total.toPrecision(3))]) },
      ],
    },
  ];
}
