/** The issue's targets, read from a run's results: a verdict each, and why a miss is a miss from the run's own numbers. */
import { percent } from "../lib/stats";
import { PEER_TTL_MS, REPORT_GRACE_MS } from "../../src/fast/peer";
import { AUTO_RELAY_PEERS, MAX_RELAY_GAP_MS, relayGap } from "../../src/fast/relay";
import { MAX_CALLS_PER_SECOND, SATURATED_UNITS_PER_CALL } from "../../src/fast/schedule";
import { SERVICE } from "./object";
import { autoOf, inManyLocations, isCostRun, LOCATIONS, MANY_LOCATIONS } from "./scenarios";
import type { ScenarioResult } from "./summary";

export interface Verdict {
  target: string;
  measured: string;
  /** undefined: no scenario of this run reads it */
  met: boolean | undefined;
  /** which design's figures decided the verdict, where the default's (`aggregate: "auto"`) scenarios ran */
  basis?: string;
  /** why `aggregate: "none"` misses it, or why the default does */
  why?: string;
}

/** The verdicts read on one seed's runs, for the report's reading across seeds. */
export interface SeedVerdicts {
  seed: number;
  verdicts: Verdict[];
  /** scenarios the targets read that failed on this seed */
  failed: string[];
}

/**
 * Whether the targets read this scenario: every fast one but the location relays' and the
 * prototypes', which are set beside them. Strict scenarios have targets of their own in the README.
 */
export function readByTargets(s: Pick<ScenarioResult, "mode" | "family">): boolean {
  return s.mode === "fast" && s.family !== "relay" && s.family !== "prototype";
}

/**
 * Whether the targets read this scenario again on further seeds: all they read but the per-client
 * keys', a tenth of a full run's time for figures far from every bound (their busiest key takes a
 * few calls a second), and `aggregate: "none"`'s where the run has the default's (`auto-`) beside
 * it, which decides the verdict; so `npm run simulate` stays within its 5 minutes on a busy 2-core
 * machine. `names`: every scenario of the run.
 */
export function rerunOnSeeds(s: Pick<ScenarioResult, "mode" | "family" | "name">, names: ReadonlySet<string>): boolean {
  return readByTargets(s) && s.family !== "per-client" && (s.family === "auto" || !names.has(autoOf(s.name)));
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

/** "a isolates' first calls, b for a waiting request, …": fast syncs by why they were made, leaving out kinds with none. */
export function callKinds(k: ScenarioResult["detail"]["callsByKind"]): string {
  const parts: [number, string][] = [
    [k.first, "an isolate's first for the key"],
    [k.waiting, "for a request its isolate's lease could not pay for"],
    [k.background, "background syncs (`syncDue`: the booked time, or a lease that would run out before it)"],
    [k.release, "releases of idle keys' ended leases or of evicted keys'"],
  ];
  return parts.filter(([v]) => v > 0).map(([v, what]) => `${n(v)} ${what}`).join(", ") || "none";
}

/** Why too much was admitted, from the worst run's numbers: onError's admissions if there were any, otherwise the leases'. */
function whyOverAdmitted(r: ScenarioResult, what: string): string {
  const d = r.detail;
  const e = d.errorsByKind;
  const object = `The object was busy ${percent(d.objectBusy)} of the run with up to ${n(d.objectMaxQueued)} calls queued and ${n(d.objectMaxPeers)} peers (a sync costs its thread ${SERVICE.baseMs} ms however many peers it holds); its busiest second after the warm-up brought ${n(r.objectCallsPerSecondPeak)} calls, ${n(d.objectCallsPerSecondPeakWithWarmup)} counting the cold start (every isolate's first call).`;
  if (d.admittedOnError === 0) {
    return `${r.name}: ${what}, with no admission from onError: the leases admitted ${n(d.admitted)} where an exact limiter admits ${n(d.exactAdmitted)}. ${object}`;
  }
  return (
    `${r.name}: ${n(d.admittedOnError)} of the ${n(d.admitted)} admissions were onError's, not a lease's: ${n(r.errors)} requests got no answer in time ` +
    `(${n(e.timeout)} timed out, ${n(e.overloaded)} refused as overloaded, ${n(e.unavailable)} met an open breaker or backoff${e.queueFull ? `, ${n(e.queueFull)} found their key's queue full` : ""}${e.reset ? `, ${n(e.reset)} lost their sync with a restarting relay, twice` : ""}). onError "local" admits from each isolate's own counter ` +
    `up to ⌊limit ÷ peers⌋ a period (peers as the object last told that isolate), starting from its share of what the object last said was free, and refuses while no object of the rule has answered the isolate (src/limiter/local-share.ts); ` +
    `at a cold start the isolates answered first were told of few peers and of units the object was still leasing to the calls queued behind them. ` +
    `The isolate reports those admissions with its next sync and the object counts them then (\`SyncRequest.unleased\`), so they shrink later leases, but they were admitted beside what the leases admitted. ${object}`
  );
}

const RELAY = '`aggregate: "location"`';
const AUTO = '`aggregate: "auto"`';
const NONE = '`aggregate: "none"`';

/**
 * The default design, `aggregate: "auto"`, as rows: its own where they ran, and each row of
 * `aggregate: "none"` that has none beside it (a run of a few families; the per-client keys').
 */
function recommended(straight: ScenarioResult[], autos: ScenarioResult[]): ScenarioResult[] {
  const names = new Set(autos.map((r) => r.name));
  return [...straight.filter((d) => !names.has(autoOf(d.name))), ...autos];
}

/** "`aggregate: "auto"` at 8, 64, 512, 4,096": which design each isolate count of `rows` was read on. */
function readOn(rows: ScenarioResult[]): string {
  const counts = (aggregated: boolean) => [...new Set(rows.filter((r) => (r.family === "auto") === aggregated).map((r) => r.isolates))].sort((a, b) => a - b).map(n).join(", ");
  const parts = [
    counts(true) && `${AUTO}, the default, at ${counts(true)} isolates`,
    counts(false) && `${NONE} at ${counts(false)} isolates where no auto scenario ran (auto is none below ${AUTO_RELAY_PEERS} peers at the key's object, but for a global key's first syncs)`,
  ].filter(Boolean);
  return `read on ${parts.join(" and ")}`;
}

/** The basis of a verdict read on `rows` of both designs, where it missed, and how `aggregate: "none"` alone fares; nothing when no auto scenario ran. */
function basisOf(rows: ScenarioResult[], straightMet: boolean | undefined, missed: string[] = []): string | undefined {
  if (!rows.some((r) => r.family === "auto")) return undefined;
  return `${readOn(rows)}; ${missed.length ? `missed at ${missed.join(", ")}; ` : ""}${NONE} alone ${straightMet ? "meets it too" : "misses it"}`;
}

/** "8 (`aggregate: "auto"`: 1.24 %)": each isolate count whose worst row is over `max`, with the design it ran. */
function overAt(rows: ScenarioResult[], value: (r: ScenarioResult) => number, max: number, format: (x: number) => string): string[] {
  const worst = new Map<number, ScenarioResult>();
  for (const r of rows) if (!worst.has(r.isolates) || value(r) > value(worst.get(r.isolates)!)) worst.set(r.isolates, r);
  return [...worst]
    .filter(([, r]) => value(r) > max)
    .sort((a, b) => a[0] - b[0])
    .map(([i, r]) => `${n(i)} (${r.family === "auto" ? AUTO : NONE}: ${format(value(r))})`);
}

/** "8: name · 64: name": the scenario with the most calls in a second at each isolate count. */
function busiest(rows: ScenarioResult[]): string {
  const best = new Map<number, ScenarioResult>();
  for (const r of rows) if (!best.has(r.isolates) || r.objectCallsPerSecondPeak > best.get(r.isolates)!.objectCallsPerSecondPeak) best.set(r.isolates, r);
  return [...best].sort((a, b) => a[0] - b[0]).map(([i, r]) => `${n(i)}: ${r.name} (${n(r.objectCallsPerSecondPeak)})`).join(" · ");
}

export function verdicts(results: ScenarioResult[]): Verdict[] {
  const today = results.filter((r) => r.family !== "prototype" && r.family !== "relay" && r.family !== "auto");
  const autos = results.filter((r) => r.family === "auto");
  const autoGlobal = autos.filter((r) => r.name.includes("-global-") && !r.name.startsWith("auto-churn-"));
  // Location relays are the alternative, set beside the default by the calls target alone.
  const relays = results.filter((r) => r.family === "relay" && !r.name.startsWith("relay-churn-"));
  const relaysIn = (many: boolean) => relays.filter((r) => inManyLocations(r.name) === many);
  const out: Verdict[] = [];
  const ok = (values: Map<number, number>, max: number) => (values.size === 0 ? undefined : [...values.values()].every((v) => v <= max));
  const all = (rows: ScenarioResult[], good: (r: ScenarioResult) => boolean) => (rows.length ? rows.every(good) : undefined);
  /** "`aggregate: "none"`: … · `aggregate: "auto"`: …", each where its scenarios ran (a further seed runs the default's alone) */
  const both = (straight: string, auto: string, absent = "not run") => [straight && `${NONE}: ${straight}`, auto && `${AUTO}: ${auto}`].filter(Boolean).join(" · ") || absent;

  for (const [algorithm, label, field, max] of [
    ["sliding-window", "fast sliding window, every isolate count, 10× load: maxPerWindowOverLimit ≤ 1.01", "maxPerWindowOverLimit", THRESHOLD.window],
    ["token-bucket", "fast token bucket, every isolate count, 10× load: tokenExcess ≤ 0.01", "tokenExcess", THRESHOLD.excess],
  ] as const) {
    const value = (r: ScenarioResult) => r[field] ?? 0;
    const rows = today.filter((r) => r.family === "global-fast" && r.algorithm === algorithm && r.load === 10);
    const aggregated = autoGlobal.filter((r) => r.algorithm === algorithm && r.load === 10);
    const m = byIsolates(rows, value, (x) => x.toFixed(3));
    const straightMet = ok(m.values, max);
    const rec = recommended(rows, aggregated);
    const met = all(rec, (r) => value(r) <= max);
    const worst = met === false ? [...rec].sort((a, b) => value(b) - value(a))[0] : straightMet === false ? m.worst : undefined;
    out.push({
      target: label,
      measured: both(m.text && `${m.text} (worst of 10×, 10× skewed, flash crowd)`, byIsolates(aggregated, value, (x) => x.toFixed(3)).text),
      met,
      ...optional("basis", basisOf(rec, straightMet, overAt(rec, value, max, (x) => x.toFixed(3)))),
      ...(worst ? { why: whyOverAdmitted(worst, `${field} ${f3(worst[field])}`) } : {}),
    });
  }

  {
    const rows = today.filter((r) => r.mode === "fast" && r.family !== "churn");
    const m = byIsolates(rows, (r) => r.objectCallsPerSecondPeak, n);
    const straightMet = ok(m.values, THRESHOLD.callsPerSecond);
    const rec = recommended(rows, autos.filter((x) => !x.name.startsWith("auto-churn-")));
    const r = byIsolates(rec, (x) => x.objectCallsPerSecondPeak, n);
    const recMet = ok(r.values, THRESHOLD.callsPerSecond);
    const rw = recMet === false ? r.worst : undefined;
    // The default's relays must not buy their calls with the bound: every auto scenario, the churn stress's included, keeps it.
    const worstWindow = Math.max(0, ...autos.map((x) => x.maxPerWindowOverLimit ?? 0));
    const worstExcess = Math.max(0, ...autos.map((x) => x.tokenExcess ?? 0));
    const boundsKept = worstWindow <= THRESHOLD.window && worstExcess <= THRESHOLD.excess;
    const met = recMet === undefined ? undefined : recMet && (autos.length === 0 || boundsKept);
    const autoText = byIsolates(autoGlobal, (x) => x.objectCallsPerSecondPeak, n).text;
    const busiestRelay = byIsolates(
      autoGlobal.filter((x) => x.detail.relay),
      (x) => x.detail.relay!.callsPerSecondPeak,
      n,
    ).text;
    // Below AUTO_RELAY_PEERS peers only a global key's first syncs go through the relays.
    const few = [...byIsolates(autoGlobal.filter((x) => x.detail.objectMaxPeers < AUTO_RELAY_PEERS), (x) => x.detail.objectMaxPeers, n).values].sort((a, b) => a[0] - b[0]);
    const fewAt = few.length ? `${few.map(([i]) => n(i)).join(" and ")} isolates, whose objects held at most ${few.map(([, peers]) => n(peers)).join(" and ")} peers` : "";
    const over = (values: Map<number, number>) => [...values].filter(([, v]) => v > THRESHOLD.callsPerSecond).sort((a, b) => a[0] - b[0]).map(([i, v]) => `${n(i)} (${n(v)})`).join(" and ");
    // Location relays, beside: in LOCATIONS, and in MANY_LOCATIONS as the default's scenarios run.
    const located = byIsolates(relaysIn(false), (x) => x.objectCallsPerSecondPeak, n);
    const many = byIsolates(relaysIn(true), (x) => x.objectCallsPerSecondPeak, n);
    const manyOver = many.worst !== undefined && many.worst.objectCallsPerSecondPeak > THRESHOLD.callsPerSecond;
    const locationText = located.text || many.text ? ` Beside it, ${RELAY} (one relay per location) took ${[located.text && `${located.text} in ${LOCATIONS} locations`, many.text && `${many.text} in ${MANY_LOCATIONS}`].filter(Boolean).join(" and ")}${manyOver ? `: ${whyManyLocations(many.worst!)}` : ""}.` : "";
    const w = m.worst;
    out.push({
      target: "object calls per key per second ≤ 250 at every isolate count, 4,096 included",
      measured: both(
        m.text && `${m.text} (busiest second after the warm-up, a global key's first period; every fast scenario)`,
        autoText && `${autoText} (the key's object, isolates in ${MANY_LOCATIONS} locations${busiestRelay ? `; the busiest continent's relay in its busiest second: ${busiestRelay}` : ""})`,
      ),
      met,
      ...optional(
        "basis",
        autos.length && recMet !== undefined
          ? `met when the default, ${AUTO}, stays within 250 at every isolate count and every one of its scenarios keeps the bounds (maxPerWindowOverLimit ≤ 1.01, tokenExcess ≤ 0.01). ` +
              `${capitalized(readOn(rec))}: ${recMet ? "all within 250" : `over 250 at ${overAt(rec, (x) => x.objectCallsPerSecondPeak, THRESHOLD.callsPerSecond, n).join(", ")}`}` +
              `${fewAt ? `; at ${fewAt}, below the ${AUTO_RELAY_PEERS} that turn it to relays, only each isolate's first sync went through one` : ""}. ` +
              `The ${AUTO} scenarios' worst maxPerWindowOverLimit ${f3(worstWindow)} and tokenExcess ${f3(worstExcess)}: ${boundsKept ? "within" : "not within"} the bounds.` +
              locationText +
              (straightMet ? ` ${NONE} alone meets it too.` : ` ${NONE} alone still misses at ${over(m.values)}.`)
          : undefined,
      ),
      ...(straightMet === false && w
        ? {
            why:
              `${w.name}: ${n(w.objectCallsPerSecondPeak)} calls in its busiest second (${n(w.detail.objectCallsPerSecondPeakWithWarmup)} counting the cold start, when every isolate makes its first call): ` +
              `${callKinds(w.detail.objectPeakByKind)}. The object books background syncs from a budget of ${MAX_CALLS_PER_SECOND} a second (src/fast/schedule.ts); ` +
              `an isolate's first call and a request whose lease cannot pay for it are not booked. Over the whole run, ${n(w.detail.calls)} calls for ${n(w.detail.requests)} requests ` +
              `(${w.detail.requestsPerCall} requests a call): ${callKinds(w.detail.callsByKind)}; ${n(w.detail.isolatesBorn)} isolates lived in the run. ` +
              `The object was busy ${percent(w.detail.objectBusy)} of the run with up to ${n(w.detail.objectMaxPeers)} peers. The busiest scenario at each count: ${busiest(rows)}.` +
              (rw?.detail.relay ? ` With ${AUTO}, ${whyRelayCalls(rw)}` : ""),
          }
        : rw?.detail.relay
          ? { why: whyRelayCalls(rw) }
          : {}),
    });
  }

  {
    const straight = today.filter((r) => r.family === "calls-at-8");
    const aggregated = autos.filter((r) => isCostRun(r.name));
    const rows = recommended(straight, aggregated);
    const text = (list: ScenarioResult[]) => list.map((r) => `${r.algorithm === "sliding-window" ? "sliding window" : "token bucket"} ${n(r.detail.limit)}/${r.detail.periodMs / 1000} s: ${r.objectCallsPer100Requests.toFixed(2)}`).join(" · ");
    const cheap = (list: ScenarioResult[]) => (list.length ? list.every((r) => r.objectCallsPer100Requests <= THRESHOLD.per100) : undefined);
    const met = cheap(rows);
    const worst = [...rows].sort((a, b) => b.objectCallsPer100Requests - a.objectCallsPer100Requests)[0];
    out.push({
      target: "10× load, 8 isolates: ≤ 2 object calls per 100 requests, for 300 per 30 s and for 3,000 per 60 s",
      measured: both(text(straight), text(aggregated)),
      met,
      ...optional("basis", basisOf(rows, cheap(straight))),
      ...(met === false && worst
        ? {
            why:
              `${worst.name}: ${n(worst.detail.calls)} calls in ${worst.detail.simulatedSeconds} s (${(worst.detail.calls / worst.detail.simulatedSeconds).toFixed(1)} a second, ` +
              `${(worst.detail.calls / worst.detail.simulatedSeconds / worst.isolates).toFixed(2)} per isolate) for ${n(worst.detail.offeredPerSecond)} requests a second: ${callKinds(worst.detail.callsByKind)}; ` +
              `${n(worst.errors)} requests got onError's answer. A saturated key's booked calls are spaced to hand out about ${SATURATED_UNITS_PER_CALL} units each, but each isolate calls at least 4 times a period and at least once a minute.`,
          }
        : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "global-fast" && r.load === 1 && r.isolates === 512);
    const aggregated = autoGlobal.filter((r) => r.load === 1 && r.isolates === 512);
    const text = rows.map((r) => `${r.algorithm}: ${percent(r.underAdmission)}`).join(" · ");
    const straightMet = all(rows, (r) => r.underAdmission <= THRESHOLD.under);
    const rec = recommended(rows, aggregated);
    const met = all(rec, (r) => r.underAdmission <= THRESHOLD.under);
    const worstOf = (list: ScenarioResult[]) => [...list].sort((a, b) => b.underAdmission - a.underAdmission)[0];
    const worst = met === false ? worstOf(rec) : straightMet === false ? worstOf(rows) : undefined;
    out.push({
      target: "1× load, 512 isolates: underAdmission ≤ 5 %",
      measured: both(text, aggregated.map((r) => `${r.algorithm}: ${percent(r.underAdmission)}`).join(" · "), "not run (needs 512 isolates)"),
      met,
      ...optional("basis", basisOf(rec, straightMet, overAt(rec, (r) => r.underAdmission, THRESHOLD.under, percent))),
      ...(worst
        ? {
            why:
              `${worst.name}: admitted ${n(worst.detail.admitted)} where an exact limiter admits ${n(worst.detail.exactAdmitted)}; ${n(worst.errors)} requests got onError's answer. ` +
              `${n(worst.detail.calls)} calls: ${callKinds(worst.detail.callsByKind)}; the object held up to ${n(worst.detail.objectMaxPeers)} peers. ` +
              `The run does not separate the causes. By design, a lease tops up what its isolate holds to its demand until its booked call (mean + √mean) and lasts half an interval past it (a quiet isolate's, up to seven of its mean gaps), and its units count as taken until the isolate reports them, ` +
              `so units leased but not yet spent are not there for the others.`,
          }
        : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "global-fast" && r.name.endsWith("-1x"));
    const aggregated = autoGlobal.filter((r) => r.name.endsWith("-1x"));
    const m = byIsolates(rows, (r) => r.waitedForObject, (x) => percent(x));
    const straightMet = ok(m.values, THRESHOLD.waited);
    const rec = recommended(rows, aggregated);
    const r = byIsolates(rec, (x) => x.waitedForObject, (x) => percent(x));
    const met = ok(r.values, THRESHOLD.waited);
    const w = met === false ? r.worst : straightMet === false ? m.worst : undefined;
    out.push({
      target: "1× load, steady state: waitedForObject ≤ 1 % (every isolate count)",
      measured: both(
        m.text && `${m.text} (worst of sliding window and token bucket, after the warm-up: the key's first period, while its window fills)`,
        byIsolates(aggregated, (r) => r.waitedForObject, (x) => percent(x)).text,
      ),
      met,
      ...optional("basis", basisOf(rec, straightMet, overAt(rec, (x) => x.waitedForObject, THRESHOLD.waited, percent))),
      ...(w
        ? {
            why:
              `${w.name}: ${percent(w.waitedForObject)} of requests waited on a call. With ${n(w.detail.offeredPerSecond)} requests a second over ${n(w.isolates)} isolates each sees ` +
              `${(w.detail.offeredPerSecond / w.isolates).toFixed(2)} a second. A request waits when its isolate has no lease for the key yet (its first request) or its lease cannot pay for it while the key had units to spare at the isolate's last grant (a key with none denies until the isolate's booked call is answered). ` +
              `${n(w.detail.calls)} calls (${w.detail.requestsPerCall} requests a call): ${callKinds(w.detail.callsByKind)}; ${n(w.detail.isolatesBorn)} isolates lived in the run, ` +
              `and the first request of each born after the start waits whatever the lease design: ${percent((w.detail.isolatesBorn - w.isolates) / Math.max(1, w.detail.requests))} of requests.`,
          }
        : {}),
    });
  }

  {
    const rows = today.filter((r) => r.family === "churn");
    const aggregated = autos.filter((r) => r.name.startsWith("auto-churn-"));
    // The same key with isolates living LIFETIME_MS, in the same design.
    const calm = (r: ScenarioResult) =>
      (r.family === "auto" ? autoGlobal : today.filter((t) => t.family === "global-fast")).find((t) => t.isolates === r.isolates && t.algorithm === r.algorithm && t.name.endsWith(`-${r.load}x`));
    const checksOf = (list: ScenarioResult[]) =>
      list.map((r) => {
        const parts: [string, boolean][] = [];
        if (r.load === 10 && r.maxPerWindowOverLimit !== null) parts.push([`maxPerWindowOverLimit ${f3(r.maxPerWindowOverLimit)}`, r.maxPerWindowOverLimit <= THRESHOLD.window]);
        if (r.load === 10 && r.tokenExcess !== null) parts.push([`tokenExcess ${f3(r.tokenExcess)}`, r.tokenExcess <= THRESHOLD.excess]);
        parts.push([`${n(r.objectCallsPerSecondPeak)} calls/s`, r.objectCallsPerSecondPeak <= THRESHOLD.callsPerSecond]);
        if (r.load === 1) parts.push([`underAdmission ${percent(r.underAdmission)}`, r.underAdmission <= THRESHOLD.under], [`waited ${percent(r.waitedForObject)}`, r.waitedForObject <= THRESHOLD.waited]);
        return { r, parts };
      });
    const text = (checks: ReturnType<typeof checksOf>) => checks.map((c) => `${c.r.algorithm === "sliding-window" ? "sw" : "tb"} ${c.r.load}×: ${c.parts.map(([w]) => w).join(", ")}`).join(" · ");
    const missedIn = (checks: ReturnType<typeof checksOf>) => checks.flatMap((c) => c.parts.filter(([, good]) => !good).map(([what]) => `${c.r.name}: ${what}`));
    const checks = checksOf(rows);
    const straightMet = rows.length ? missedIn(checks).length === 0 : undefined;
    const rec = recommended(rows, aggregated);
    const recMissed = missedIn(checksOf(rec));
    const met = rec.length ? recMissed.length === 0 : undefined;
    // Why the default misses, or else why none does.
    const explained = met === false ? rec : straightMet === false ? rows : [];
    out.push({
      target: "isolates vanishing with their leases (512 isolates living 30 s on average) break none of the above",
      measured: both(text(checks), text(checksOf(aggregated))),
      met,
      ...optional(
        "basis",
        aggregated.length && rec.length
          ? `read on ${rec.map((x) => `\`${x.name}\``).join(", ")} (${AUTO}, the default, where it ran); ${recMissed.length ? `missed: ${recMissed.join("; ")}; ` : ""}${NONE} alone ${straightMet ? "meets it too" : "misses it"}`
          : undefined,
      ),
      ...(explained.length
        ? {
            why:
              `Missed: ${missedIn(checksOf(explained)).join("; ")}. The same 512 isolates living 5 minutes: ` +
              explained.map((r) => calm(r)).filter((r): r is ScenarioResult => r !== undefined).map((r) => `${r.name} ${n(r.objectCallsPerSecondPeak)} calls/s, under-admission ${percent(r.underAdmission)}, waited ${percent(r.waitedForObject)}`).join("; ") +
              `. ${n(Math.max(...explained.map((r) => r.detail.isolatesBorn)))} isolates lived in a run (each new one's first request waits on its first call: ${explained.map((r) => `${r.name} ${n(r.detail.callsByKind.first)}`).join(", ")}). ` +
              `A vanished isolate's lease stays pinned until it ends plus REPORT_GRACE_MS (${REPORT_GRACE_MS / 1000} s) and is then counted as spent, and its peer is forgotten PEER_TTL_MS (${PEER_TTL_MS / 1000} s) after its last or booked sync: ` +
              `the object held up to ${n(Math.max(...explained.map((r) => r.detail.objectMaxPeers)))} peers, each ${SERVICE.alarmPerPeerMs * 1000} µs more of every alarm's cost (a sync's does not grow with them).`,
          }
        : {}),
    });
  }
  return out;
}

/** Why the relays of many locations send the key's object more calls: each hears too few syncs to batch them, and the gap is capped. */
function whyManyLocations(r: ScenarioResult): string {
  const relay = r.detail.relay!;
  return (
    `${r.name}'s ${n(relay.relays)} relays each forward a few syncs a second (the busiest ${n(relay.callsPerSecondPeak)} in its busiest second), so batches carry ${relay.syncsPerBatch.toFixed(2)} syncs on average, ` +
    `and the object can ask each for a gap of at most ${MAX_RELAY_GAP_MS} ms (\`MAX_RELAY_GAP_MS\`: a waiting sync must still be answered within the default 1 s timeout), ${n((relay.relays * 1000) / MAX_RELAY_GAP_MS)} calls a second at most`
  );
}

/** Why a relay scenario's key's object still heard too many calls: its batches, how full they were, and the relays' pace. */
function whyRelayCalls(r: ScenarioResult): string {
  const relay = r.detail.relay!;
  return (
    `${r.name}: ${n(r.objectCallsPerSecondPeak)} calls at the key's object in its busiest second, each a batch from one of ${n(relay.relays)} relays (one in flight per relay, paced by the object to ${relayGap(relay.relays)} ms apart or more); ` +
    `${n(relay.batches)} batches carried ${n(relay.calls)} syncs, ${relay.syncsPerBatch.toFixed(2)} a batch on average, and the busiest relay took ${n(relay.callsPerSecondPeak)} calls in its busiest second.`
  );
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** `{ [key]: value }` when there is a value, else nothing: for optional fields. */
function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value ? { [key]: value } : {}) as { [P in K]?: string };
}
