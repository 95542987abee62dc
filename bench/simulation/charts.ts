/** The report's charts, as the bench's ChartSpecs (rendered by bench/lib/svg.ts into bench/charts/simulation/). */
import type { ChartSpec } from "../lib/section";
import { autoOf, relayOf } from "./scenarios";
import type { ScenarioResult } from "./summary";

/** A per-second series as chart points, second by second. */
const seconds = (series: number[]): [number, number][] => series.map((v, i) => [i, v]);
const label = (algorithm: string) => (algorithm === "sliding-window" ? "sliding window" : "token bucket");

/** One series over isolate counts: `value` of each row `pick` keeps, the worst per isolate count. */
function overIsolates(name: string, rows: ScenarioResult[], value: (r: ScenarioResult) => number | null): ChartSpec["series"][number] {
  const worst = new Map<number, number>();
  for (const r of rows) {
    const v = value(r);
    if (v === null || !Number.isFinite(v)) continue;
    worst.set(r.isolates, Math.max(worst.get(r.isolates) ?? -Infinity, v));
  }
  return { name, points: [...worst].sort((a, b) => a[0] - b[0]) };
}

export function charts(results: ScenarioResult[]): ChartSpec[] {
  const global = results.filter((r) => r.family === "global-fast");
  const relayed = results.filter((r) => r.family === "relay" && !r.name.startsWith("relay-churn-"));
  const automatic = results.filter((r) => r.family === "auto" && !r.name.startsWith("auto-churn-"));
  const out: ChartSpec[] = [];
  const algorithms = ["sliding-window", "token-bucket"];
  const isolates = [...new Set(global.map((r) => r.isolates))].sort((a, b) => a - b);

  if (global.length) {
    const series = algorithms.flatMap((a) => [
      overIsolates(`${label(a)}, aggregate: none, 1×`, global.filter((r) => r.algorithm === a && r.load === 1), (r) => r.objectCallsPerSecondPeak),
      overIsolates(`${label(a)}, aggregate: none, 10×`, global.filter((r) => r.algorithm === a && r.load === 10), (r) => r.objectCallsPerSecondPeak),
    ]);
    series.push(
      ...algorithms.map((a) => overIsolates(`${label(a)}, aggregate: location (worst of 1×, 10×, flash crowd)`, relayed.filter((r) => r.algorithm === a), (r) => r.objectCallsPerSecondPeak)),
      ...algorithms.map((a) => overIsolates(`${label(a)}, aggregate: auto, the default (worst of 1×, 10×, flash crowd)`, automatic.filter((r) => r.algorithm === a), (r) => r.objectCallsPerSecondPeak)),
      { name: "target: 250", points: isolates.map((i) => [i, 250]) },
    );
    out.push({ file: "calls-per-second", title: "Object calls per key per second (busiest second after the warm-up)", kind: "line", xLabel: "isolates", yLabel: "calls per second to the key's object", series: series.filter((s) => s.points.length) });

    const accuracy = [
      overIsolates("sliding window, aggregate: none: most admitted in a fixed window ÷ limit", global.filter((r) => r.algorithm === "sliding-window" && r.load === 10), (r) => r.maxPerWindowOverLimit),
      overIsolates("token bucket, aggregate: none: 1 + tokenExcess", global.filter((r) => r.algorithm === "token-bucket" && r.load === 10), (r) => (r.tokenExcess === null ? null : 1 + r.tokenExcess)),
      overIsolates("sliding window, aggregate: auto, the default", automatic.filter((r) => r.algorithm === "sliding-window" && r.load === 10), (r) => r.maxPerWindowOverLimit),
      overIsolates("token bucket, aggregate: auto, the default", automatic.filter((r) => r.algorithm === "token-bucket" && r.load === 10), (r) => (r.tokenExcess === null ? null : 1 + r.tokenExcess)),
      { name: "target: 1.01", points: isolates.map((i): [number, number] => [i, 1.01]) },
    ];
    out.push({ file: "over-admission", title: "Admitted against the limit at 10× load (worst of steady, skewed and flash crowd)", kind: "line", xLabel: "isolates", yLabel: "× the limit", series: accuracy.filter((s) => s.points.length) });

    const waited = algorithms.flatMap((a) => [
      overIsolates(`${label(a)}, aggregate: none, 1×`, global.filter((r) => r.algorithm === a && r.name.endsWith("-1x")), (r) => 100 * r.waitedForObject),
      overIsolates(`${label(a)}, aggregate: none, 10×`, global.filter((r) => r.algorithm === a && r.name.endsWith("-10x")), (r) => 100 * r.waitedForObject),
      overIsolates(`${label(a)}, aggregate: auto, the default, 1×`, automatic.filter((r) => r.algorithm === a && r.name.endsWith("-1x")), (r) => 100 * r.waitedForObject),
    ]);
    out.push({ file: "waited", title: "Requests that waited on an object call (steady state)", kind: "line", xLabel: "isolates", yLabel: "% of requests", series: waited.filter((s) => s.points.length) });
  }

  const flash = global.filter((r) => r.name.endsWith("-flash") && r.algorithm === "sliding-window").sort((a, b) => Math.abs(a.isolates - 512) - Math.abs(b.isolates - 512))[0];
  if (flash) {
    out.push({
      file: "flash-crowd",
      title: `Flash crowd, sliding window, ${flash.isolates.toLocaleString("en-US")} isolates: per second`,
      kind: "line",
      xLabel: "seconds",
      yLabel: "per second",
      series: [
        { name: "offered", points: seconds(flash.detail.offeredPerSecondSeries) },
        { name: "admitted", points: seconds(flash.detail.admittedPerSecond) },
        { name: "object calls", points: seconds(flash.detail.callsPerSecond) },
        { name: "limit's rate", points: [[0, (flash.detail.limit * 1000) / flash.detail.periodMs], [flash.detail.simulatedSeconds, (flash.detail.limit * 1000) / flash.detail.periodMs]] },
      ],
    });
  }

  // The flash crowd at the most isolates, with and without relays (location, and the default's where it ran): the key's object's calls each second.
  const relayFlash = relayed.filter((r) => r.name.endsWith("-flash") && r.algorithm === "sliding-window").sort((a, b) => b.isolates - a.isolates)[0];
  const plainFlash = relayFlash && global.find((r) => relayOf(r.name) === relayFlash.name);
  const autoFlash = plainFlash && automatic.find((r) => r.name === autoOf(plainFlash.name));
  if (relayFlash && plainFlash) {
    out.push({
      file: "relay-flash",
      title: `Flash crowd, sliding window, ${relayFlash.isolates.toLocaleString("en-US")} isolates: the key's object's calls per second, with and without relays`,
      kind: "line",
      xLabel: "seconds",
      yLabel: "calls per second",
      series: [
        { name: "aggregate: none", points: seconds(plainFlash.detail.callsPerSecond) },
        { name: "aggregate: location", points: seconds(relayFlash.detail.callsPerSecond) },
        ...(autoFlash ? [{ name: "aggregate: auto, the default", points: seconds(autoFlash.detail.callsPerSecond) }] : []),
        { name: "target: 250", points: [[0, 250], [relayFlash.detail.simulatedSeconds, 250]] },
      ],
    });
  }

  const strict = results.filter((r) => r.family === "strict-ceiling");
  if (strict.length) {
    const counts = [...new Set(strict.map((r) => r.isolates))].sort((a, b) => a - b);
    out.push({
      file: "strict-ceiling",
      title: "Strict hot key: decisions served without error, against offered load",
      kind: "line",
      xLabel: "offered requests per second",
      yLabel: "served per second",
      series: [
        ...counts.map((c) => ({ name: `${c.toLocaleString("en-US")} isolates`, points: strict.filter((r) => r.isolates === c).map((r): [number, number] => [r.detail.offeredPerSecond, r.detail.servedPerSecond]) })),
        ...counts.map((c) => ({
          name: `prototype with deadlines, ${c.toLocaleString("en-US")} isolates`,
          points: results.filter((r) => r.family === "prototype" && r.mode === "strict" && r.isolates === c).map((r): [number, number] => [r.detail.offeredPerSecond, r.detail.servedPerSecond]),
        })).filter((s) => s.points.length),
        { name: "offered", points: strict.filter((r) => r.isolates === counts[0]).map((r): [number, number] => [r.detail.offeredPerSecond, r.detail.offeredPerSecond]) },
      ],
    });
  }
  const rtt = results.filter((r) => r.family === "strict-rtt");
  if (rtt.length) {
    const groups = [...new Set(rtt.map((r) => r.name.replace(/-i\d+-\d+rps$/, "")))];
    out.push({
      file: "strict-coalescing",
      title: "Strict hot key, 8 isolates: served per second, coalesced or not, by round trip",
      kind: "line",
      xLabel: "offered requests per second",
      yLabel: "served per second",
      series: groups.map((g) => ({ name: g.replace("strict-rtt", "RTT ").replace(/-(coalesced|alone)$/, " ms, $1"), points: rtt.filter((r) => r.name.startsWith(`${g}-`)).map((r): [number, number] => [r.detail.offeredPerSecond, r.detail.servedPerSecond]) })),
    });
  }
  return out;
}
