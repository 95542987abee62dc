/** The strict sections of the simulation report: one hot key's ceiling, what coalescing buys by round trip, and strict at 10× a limit. */
import { percent, table } from "../../lib/stats";
import type { ChartSpec } from "../../lib/section";
import type { ScenarioResult } from "../summary";
import { img, n, scenarioTable } from "./format";

/** A ceiling as the table shows it: "≥" when even the highest load run was served cleanly. */
function ceilingText(c: ScenarioResult | undefined, highest: ScenarioResult): string {
  if (!c) return "below the lowest load run";
  return c === highest ? `≥ ${n(c.detail.offeredPerSecond)}/s (the highest load run)` : `${n(c.detail.offeredPerSecond)}/s`;
}

/** The strict ceiling: the most offered load served with under 1 % errors, per group. */
function ceilings(rows: ScenarioResult[], group: (r: ScenarioResult) => string): { group: string; ceiling: ScenarioResult | undefined; best: ScenarioResult; highest: ScenarioResult }[] {
  const groups = [...new Set(rows.map(group))];
  return groups.map((g) => {
    const mine = rows.filter((r) => group(r) === g).sort((a, b) => a.detail.offeredPerSecond - b.detail.offeredPerSecond);
    // The highest load still served cleanly, below the first load that was not.
    const firstBad = mine.findIndex((r) => r.errors / Math.max(1, r.detail.requests) >= 0.01);
    const clean = firstBad === -1 ? mine : mine.slice(0, firstBad);
    const best = [...mine].sort((a, b) => b.detail.servedPerSecond - a.detail.servedPerSecond)[0]!;
    return { group: g, ceiling: clean.at(-1), best, highest: mine.at(-1)! };
  });
}

export function strictSections(ceiling: ScenarioResult[], rtt: ScenarioResult[], limited: ScenarioResult[], charts: ChartSpec[]): string[] {
  const out: string[] = [];
  if (ceiling.length) {
    const rows = ceilings(ceiling, (r) => String(r.isolates));
    out.push(
      "## Strict hot key: its ceiling",
      "",
      "One strict key whose limit is never reached, so every request needs its object; offered load rises. Requests are coalesced by floodgate's own `Lanes` (src/strict/lanes.ts), as src/strict/coalescer.ts coalesces them: one call in flight per key per isolate, the requests that arrive meanwhile go together in the next (at most 128).",
      "",
      "Past its ceiling a key does not level off: calls wait in the object's queue longer than the 1 s timeout, their answers come too late to be used, breakers open, and what is served falls. " +
        rows.map(({ group, highest }) => `At ${n(Number(group))} isolates and ${n(highest.detail.offeredPerSecond)}/s offered, ${n(highest.detail.servedPerSecond)}/s were served (${percent(highest.errors / Math.max(1, highest.detail.requests))} errors, ${highest.detail.requestsPerCall.toFixed(1)} requests a call).`).join(" ") +
        " A coalesced batch holds what one isolate receives within one round trip, so requests spread over many isolates go one a call and the key's ceiling is the object's, about 1,000 calls a second.",
      "",
      table(
        ["isolates", "ceiling: most offered load served with < 1 % errors", "most served", "at that load: calls/s", "decisions per call", "object busy"],
        rows.map(({ group, ceiling: c, best, highest }) => [
          n(Number(group)),
          ceilingText(c, highest),
          `${n(best.detail.servedPerSecond)}/s (at ${n(best.detail.offeredPerSecond)}/s offered)`,
          c ? n(c.detail.calls / c.detail.simulatedSeconds) : "—",
          c ? (1 / Math.max(1e-9, c.objectCallsPer100Requests / 100)).toFixed(1) : "—",
          c ? percent(c.detail.objectBusy) : "—",
        ]),
      ),
      "",
      scenarioTable(ceiling),
      "",
      img(charts, "strict-ceiling"),
    );
  }
  if (rtt.length) {
    const rows = ceilings(rtt, (r) => r.name.replace(/-i\d+-\d+rps$/, ""));
    out.push(
      "## What coalescing buys, by round trip",
      "",
      "The strict hot key at 8 isolates, every isolate at the same round trip, with coalescing and without (each request its own call, as decideStrict does without a `waitUntil`). " +
        "Coalesced, an isolate sends at most one batch of 128 per round trip, so 8 isolates carry at most 8 × 128 ÷ RTT decisions a second, and the object at most 128 per 2.3 ms (1 ms a call and 10 µs a decision); alone, the object's 1,000 calls a second bound it whatever the round trip.",
      "",
      table(
        ["round trip, calls", "ceiling (< 1 % errors)", "most served", "decisions per call at the ceiling"],
        rows.map(({ group, ceiling: c, best, highest }) => [
          group.replace("strict-rtt", "").replace(/-(coalesced|alone)$/, " ms, $1"),
          ceilingText(c, highest),
          `${n(best.detail.servedPerSecond)}/s`,
          c ? c.detail.requestsPerCall.toFixed(1) : "—",
        ]),
      ),
      "",
      img(charts, "strict-coalescing"),
    );
  }
  if (limited.length) out.push("## Strict at 10× a limit", "", "3,000 per 60 s, 10× offered: a denied key is answered from each isolate's denial cache until the object's retryAfter.", "", scenarioTable(limited), "");
  return out;
}
