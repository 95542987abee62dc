/** The targets, read from a run's results: a verdict each, why a miss is a miss from the run's own numbers, and the prototype's figure beside it. */
import { percent } from "../lib/stats";
import { SERVICE } from "./object";
import type { ScenarioResult } from "./summary";

export interface Verdict {
  target: string;
  measured: string;
  /** undefined: no scenario of this run reads it */
  met: boolean | undefined;
  why?: string;
  /** the same figure under the simulator-only budget prototype, when the run has it */
  prototype?: string;
}

const THRESHOLD = { window: 1.01, excess: 0.01, callsPerSecond: 250, per100: 2, under: 0.05, waited: 0.01 } as const;

const n = (x: number) => Math.round(x).toLocaleString("en-US");
const f3 = (x: number | null) => (x === null ? "—" : x.toFixed(3));

/** Groups rows by isolate count and reads the worst of `value` in each, as "8: … · 64: …". */
function byIsolates(rows: ScenarioResult[], value: (r: ScenarioResult) => number, format: (x: number) => string): { text: string; worst: ScenarioResult | undefined; values: Map<number, number> } {
  const values = new Map<number, number>();
  let worst: ScenarioResult | undefined;
  for (const r of rows) {
    const v = value(r);
    if (!values.has(r.isolates) || v > values.get(r.isolates)!) values.set(r.isolates, v);
    if (!worst || v > value(worst)) worst = r;
  }
  const text = [...values].sort((a, b) => a[0] - b[0]).map(([i, v]) => `${n(i)}: ${format(v)}`).join(" · ");
  return { text, worst, values };
}

/** Why too much was admitted: onError's answers, from the worst run's numbers. */
function whyOverAdmitted(r: ScenarioResult, what: string): string {
  const d = r.detail;
  const e = d.errorsByKind;
  if (d.admittedOnError === 0) return `${r.name}: ${what}, with no admission from onError; see its row in the tables below.`;
  return (
    `${r.name}: ${n(d.admittedOnError)} of the ${n(d.admitted)} admissions were onError's, not the lease's: ${n(r.errors)} requests got no answer in time ` +
    `(${n(e.timeout)} timed out, ${n(e.overloaded)} refused as overloaded, ${n(e.unavailable)} met an open breaker). onError "local" admits from each isolate's own counter ` +
    `up to ⌊limit ÷ peers⌋ a period (peers as the object last told that isolate; 1, the whole limit, for an isolate that never heard from it), on top of what the object leased to the isolates whose syncs got through. ` +
    `The object was busy ${percent(d.objectBusy)} of the run with up to ${n(d.objectMaxQueued)} calls queued: ${n(d.objectMaxPeers)} peers in its one row ` +
    `(${n(d.objectMaxRowBytes)} bytes of JSON each write) make a sync cost ${(SERVICE.baseMs + SERVICE.perPeerMs * d.objectMaxPeers).toFixed(1)} ms of its thread.`
  );
}

/** "8: name · 64: name": the scenario with the most calls in a second at each isolate count. */
function busiest(rows: ScenarioResult[]): string {
  const best = new Map<number, ScenarioResult>();
  for (const r of rows) if (!best.has(r.isolates) || r.objectCallsPerSecondPeak > best.get(r.isolates)!.objectCallsPerSecondPeak) best.set(r.isolates, r);
  return [...best].sort((a, b) => a[0] - b[0]).map(([i, r]) => `${n(i)}: ${r.name} (${n(r.objectCallsPerSecondPeak)})`).join(" · ");
}

export function verdicts(results: ScenarioResult[]): Verdict[] {
  const today = results.filter((r) => r.detail.schedule === "today");
  const proto = results.filter((r) => r.family === "prototype" && r.mode === "fast");
  const out: Verdict[] = [];
  const ok = (values: Map<number, number>, max: number) => (values.size === 0 ? undefined : [...values.values()].every((v) => v <= max));

  for (const [algorithm, label, field, max] of [
    ["sliding-window", "fast sliding window, every isolate count, 10× load: maxPerWindowOverLimit ≤ 1.01", "maxPerWindowOverLimit", THRESHOLD.window],
    ["token-bucket", "fast token bucket, every isolate count, 10× load: tokenExcess ≤ 0.01", "tokenExcess", THRESHOLD.excess],
  ] as const) {
    const value = (r: ScenarioResult) => r[field] ?? 0;
    const rows = today.filter((r) => r.family === "global-fast" && r.algorithm === algorithm && r.load === 10);
    const m = byIsolates(rows, value, (x) => x.toFixed(3));
    const met = ok(m.values, max);
    const p = byIsolates(proto.filter((r) => r.algorithm === algorithm && r.load === 10), value, (x) => x.toFixed(3));
    out.push({
      target: label,
      measured: m.text ? `${m.text} (worst of 10×, 10× skewed, flash crowd)` : "not run",
      met,
      ...(met === false && m.worst ? { why: whyOverAdmitted(m.worst, `${field} ${f3(m.worst[field])}`) } : {}),
      ...(p.text ? { prototype: p.text } : {}),
    });
  }

  {
    const rows = today.filter((r) => r.mode === "fast" && r.family !== "churn");
    const m = byIsolates(rows, (r) => r.objectCallsPerSecondPeak, n);
    const met = ok(m.values, THRESHOLD.callsPerSecond);
    const w = m.worst;
    const p = byIsolates(proto, (r) => r.objectCallsPerSecondPeak, n);
    out.push({
      target: "object calls per key per second ≤ 250 at every isolate count, 4,096 included",
      measured: m.text ? `${m.text} (busiest second after the 10 s warm-up; every fast scenario)` : "not run",
      met,
      ...(met === false && w
        ? {
            why:
              `${w.name}: ${n(w.objectCallsPerSecondPeak)} calls in one second (${n(w.detail.objectCallsPerSecondPeakWithWarmup)} counting the cold start, when every isolate makes its first call). ` +
              `Each of the ${n(w.isolates)} isolates with traffic for the key calls its object once a sync interval (1 s) or sooner when its lease runs low, and an isolate whose lease ran out calls on the request's path: ` +
              `${n(w.detail.calls)} calls for ${n(w.detail.requests)} requests (${w.detail.requestsPerCall} requests a call). ` +
              `One object can serve about ${n(1000 / (SERVICE.baseMs + SERVICE.perPeerMs * w.detail.objectMaxPeers))} syncs a second with ${n(w.detail.objectMaxPeers)} peers in its row; it was busy ${percent(w.detail.objectBusy)} of the run. ` +
              `The busiest scenario at each count: ${busiest(rows)}.`,
          }
        : {}),
      ...(p.text ? { prototype: p.text } : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "calls-at-8");
    const text = rows.map((r) => `${r.algorithm === "sliding-window" ? "sliding window" : "token bucket"} ${n(r.detail.limit)}/${r.detail.periodMs / 1000} s: ${r.objectCallsPer100Requests.toFixed(2)}`).join(" · ");
    const met = rows.length ? rows.every((r) => r.objectCallsPer100Requests <= THRESHOLD.per100) : undefined;
    const worst = [...rows].sort((a, b) => b.objectCallsPer100Requests - a.objectCallsPer100Requests)[0];
    out.push({
      target: "10× load, 8 isolates: ≤ 2 object calls per 100 requests, for 300 per 30 s and for 3,000 per 60 s",
      measured: text || "not run",
      met,
      ...(met === false && worst
        ? {
            why:
              `${worst.name}: ${n(worst.detail.calls)} calls in ${worst.detail.simulatedSeconds} s (${(worst.detail.calls / worst.detail.simulatedSeconds).toFixed(1)} a second, ` +
              `${(worst.detail.calls / worst.detail.simulatedSeconds / 8).toFixed(2)} per isolate) for ${n(worst.detail.offeredPerSecond)} requests a second. ` +
              `While the key is denied, each isolate's denial lasts max(retryAfter, one sync interval), and the request that finds it over waits on a sync: every isolate calls about once a second whatever its traffic, ` +
              `and when the window frees units the isolates that get them top up as their leases run low (up to four times an interval). At ${n(worst.detail.offeredPerSecond / 8)} requests a second per isolate that is ${worst.objectCallsPer100Requests.toFixed(1)} calls per 100.`,
          }
        : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "global-fast" && r.load === 1 && r.isolates === 512);
    const text = rows.map((r) => `${r.algorithm}: ${percent(r.underAdmission)}`).join(" · ");
    const met = rows.length ? rows.every((r) => r.underAdmission <= THRESHOLD.under) : undefined;
    const worst = [...rows].sort((a, b) => b.underAdmission - a.underAdmission)[0];
    const p = proto.filter((r) => r.load === 1 && r.isolates === 512).map((r) => `${r.algorithm}: ${percent(r.underAdmission)}`).join(" · ");
    out.push({
      target: "1× load, 512 isolates: underAdmission ≤ 5 %",
      measured: text || "not run (needs 512 isolates)",
      met,
      ...(met === false && worst
        ? { why: `${worst.name}: admitted ${n(worst.detail.admitted)} where an exact limiter admits ${n(worst.detail.exactAdmitted)}; ${n(worst.errors)} requests got onError's answer, and leases pinned in isolates that do not spend them hold units back from the rest.` }
        : {}),
      ...(p ? { prototype: p } : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "global-fast" && r.name.endsWith("-1x"));
    const m = byIsolates(rows, (r) => r.waitedForObject, (x) => percent(x));
    const met = ok(m.values, THRESHOLD.waited);
    const w = m.worst;
    const p = byIsolates(proto.filter((r) => r.load === 1), (r) => r.waitedForObject, (x) => percent(x));
    out.push({
      target: "1× load, steady state: waitedForObject ≤ 1 % (every isolate count)",
      measured: m.text ? `${m.text} (worst of sliding window and token bucket, after the 10 s warm-up)` : "not run",
      met,
      ...(met === false && w
        ? {
            why:
              `${w.name}: ${percent(w.waitedForObject)} of requests waited on a call. With ${n(w.detail.offeredPerSecond)} requests a second over ${n(w.isolates)} isolates each sees ` +
              `${(w.detail.offeredPerSecond / w.isolates).toFixed(2)} a second; a lease is sized to an isolate's recent demand over one sync interval (1 s; longer only for a sliding-window key far from its limit), ` +
              `so at the limit a lease holds a unit or two, runs out, or ends before the next request, and that request waits for a sync (${w.detail.requestsPerCall} requests a call).`,
          }
        : {}),
      ...(p.text ? { prototype: p.text } : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "churn");
    const calm = (r: ScenarioResult) => today.find((t) => t.family === "global-fast" && t.isolates === r.isolates && t.algorithm === r.algorithm && t.name.endsWith(`-${r.load}x`));
    const checks = rows.map((r) => {
      const parts: [string, boolean][] = [];
      if (r.load === 10 && r.maxPerWindowOverLimit !== null) parts.push([`maxPerWindowOverLimit ${f3(r.maxPerWindowOverLimit)}`, r.maxPerWindowOverLimit <= THRESHOLD.window]);
      if (r.load === 10 && r.tokenExcess !== null) parts.push([`tokenExcess ${f3(r.tokenExcess)}`, r.tokenExcess <= THRESHOLD.excess]);
      parts.push([`${n(r.objectCallsPerSecondPeak)} calls/s`, r.objectCallsPerSecondPeak <= THRESHOLD.callsPerSecond]);
      if (r.load === 1) parts.push([`underAdmission ${percent(r.underAdmission)}`, r.underAdmission <= THRESHOLD.under], [`waited ${percent(r.waitedForObject)}`, r.waitedForObject <= THRESHOLD.waited]);
      return { r, parts };
    });
    const met = rows.length ? checks.every((c) => c.parts.every(([, good]) => good)) : undefined;
    const missed = checks.flatMap((c) => c.parts.filter(([, good]) => !good).map(([what]) => `${c.r.name}: ${what}`));
    out.push({
      target: "isolates vanishing with their leases (512 isolates living 30 s on average) break none of the above",
      measured: checks.map((c) => `${c.r.algorithm === "sliding-window" ? "sw" : "tb"} ${c.r.load}×: ${c.parts.map(([w]) => w).join(", ")}`).join(" · ") || "not run",
      met,
      ...(met === false
        ? {
            why:
              `Missed: ${missed.join("; ")}. The same 512 isolates living 5 minutes: ` +
              rows.map((r) => calm(r)).filter((r): r is ScenarioResult => r !== undefined).map((r) => `${r.name} ${n(r.objectCallsPerSecondPeak)} calls/s, under-admission ${percent(r.underAdmission)}, waited ${percent(r.waitedForObject)}`).join("; ") +
              `. A vanished isolate's lease stays pinned until it ends plus REPORT_GRACE_MS (10 s) and is then counted as spent, and its peer entry stays in the object's row for PEER_TTL_MS (10 min): ` +
              `with isolates living 30 s the row held up to ${n(Math.max(...rows.map((r) => r.detail.objectMaxPeers)))} peers, each a little more of every sync's cost.`,
          }
        : {}),
    });
  }
  return out;
}
