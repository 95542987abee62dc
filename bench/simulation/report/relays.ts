/** The relay sections of the simulation report: location relays, the default's continental relays, and the simulator-only prototypes. */
import { percent, table } from "../../lib/stats";
import type { ChartSpec } from "../../lib/section";
import { CONTINENTS } from "../latency";
import { SERVICE } from "../object";
import { QUIET_GAPS, QUIET_UNTIL_INTERVALS } from "../../../src/fast/lease";
import { POOL_LEASE_MS } from "../pool-relay";
import { AUTO_DIRECT_PEERS, AUTO_RELAY_PEERS, MAX_RELAY_GAP_MS, RELAY_ACTIVE_MS, RELAY_BATCH, RELAY_CALLS_PER_SECOND, RELAY_GAP_MS, RELAY_QUEUE, relayGap } from "../../../src/fast/relay";
import { autoOf, inManyLocations, LOCATIONS, MANY_LOCATIONS, relayOf } from "../scenarios";
import type { ScenarioResult } from "../summary";
import { beside, boundText, type Extra, img, n, scenarioTable, span, waitText } from "./format";

export function prototypeSection(proto: ScenarioResult[], all: ScenarioResult[]): string[] {
  const out: string[] = ["## Prototypes (simulator only)", "", "**Not floodgate's behaviour: nothing in `src/` does this.** Each wraps floodgate's code in bench/simulation/ and is measured on the same traffic.", ""];
  const deadline = proto.filter((p) => p.mode === "strict");
  if (deadline.length) {
    const rows = deadline.map((p) => {
      const today = all.find((r) => r.family === "strict-ceiling" && r.isolates === p.isolates && Math.abs(r.detail.offeredPerSecond - p.detail.offeredPerSecond) / p.detail.offeredPerSecond < 0.05);
      return [
        `${n(p.isolates)} isolates, ${n(p.detail.offeredPerSecond)}/s offered`,
        beside(today, p, (x) => n(x.detail.servedPerSecond)),
        beside(today, p, (x) => percent(x.errors / Math.max(1, x.detail.requests))),
        beside(today, p, (x) => percent(x.detail.objectBusy)),
      ];
    });
    out.push(
      "### Calls that carry their deadline (strict mode)",
      "",
      "Each call carries the time its caller stops waiting (sent + the rule's timeout); the object answers a call it reaches after that at once, without deciding or writing (50 µs), instead of spending 1 ms on an answer nobody will read. The strict hot key past its ceiling:",
      "",
      table(["strict hot key (floodgate → prototype)", "served/s", "errors", "object busy"], rows),
      "",
    );
  }
  const pooled = proto.filter((p) => p.mode === "fast");
  if (pooled.length) {
    /** The same scenario with relays that forward, as src/ has them: location relays for `proto-pool-`, the default's continental ones for `proto-cpool-`. */
    const forwarding = (p: ScenarioResult) => all.find((r) => r.name === p.name.replace(/^proto-pool-/, "relay-").replace(/^proto-cpool-/, "auto-"));
    const rows = pooled.map((p) => {
      const relayed = forwarding(p);
      return [
        `\`${p.name}\``,
        beside(relayed, p, boundText),
        beside(relayed, p, (x) => n(x.objectCallsPerSecondPeak)),
        beside(relayed, p, (x) => percent(x.underAdmission)),
        beside(relayed, p, (x) => percent(x.waitedForObject)),
        beside(relayed, p, waitText),
      ];
    });
    const calls = (x: ScenarioResult) => x.objectCallsPerSecondPeak;
    const p50 = (x: ScenarioResult) => x.detail.waitMs?.p50 ?? 0;
    const ms = (x: number) => `${Math.round(x)} ms`;
    /** One design's figures on these scenarios: calls, under-admission of the sliding window at 1×, waits. */
    const figures = (rows: ScenarioResult[], label: string): string =>
      `${label}: the key's object's busiest second ${span(rows, calls, n)} calls; ` +
      `a sliding window at 1× admitted ${span(rows.filter((x) => x.load === 1 && x.algorithm === "sliding-window"), (x) => x.underAdmission, percent)} less than an exact limiter; ` +
      `at 1× ${span(rows.filter((p) => p.load === 1), (x) => x.waitedForObject, percent)} of requests waited, ${span(rows, p50, ms)} at the median.`;
    const relayed = pooled.flatMap((p) => forwarding(p) ?? []);
    const late = pooled.filter((p) => p.load === 1 && p.algorithm === "sliding-window" && p.detail.waitsByCause);
    const lateText = late.length
      ? ` At 1× the sliding window's pooled waits are mostly requests that came after their isolate's booked time and found its lease spent with no call on its way (${late.map((p) => `\`${p.name}\` ${percent(p.detail.waitsByCause!.spentAfterBooked / Math.max(1, p.detail.steadyRequests))} of requests`).join(", ")}; *Why requests waited* above).`
      : "";
    const summary = ["Measured, not tuned beyond what is said above.", figures(relayed, "Relays that forward, as src/ has them"), figures(pooled, "Pooled") + lateText].join(" ");
    out.push(
      "### Relays that hold a lease for their location or continent (fast mode)",
      "",
      `bench/simulation/pool-relay.ts: each location's relay (\`proto-pool-\`) or continent's (\`proto-cpool-\`) is one peer of the key's object and syncs with it as an isolate does (floodgate's \`nextSync\`, \`applyLease\`, \`syncDue\` on its own \`LocalKey\`), at the times the object books for it; it answers its isolates' syncs from the units it holds, carving each a sub-lease out of one of its lots, sized and timed as the key's object leases an isolate (its demand read by floodgate's \`demandRate\` until its next call an interval on has had half an interval to be answered, with a standard deviation more, topping up what it holds; lasting until then or, for a quiet isolate, ${QUIET_GAPS} of its mean gaps, up to ${QUIET_UNTIL_INTERVALS} intervals), never past a lot it holds units of, and reports upward, against that lot, what they report spent. So that a sub-lease can last as long as an isolate's lease, the key's object makes a pooled relay's lease and pins last ${POOL_LEASE_MS / 1000} s at least (\`lastLonger\` in bench/simulation/object.ts, not in src/): with the relay's lots ending at its booked call, sub-leases lasted about a second and 38–41 % of requests at 1× waited. An isolate whose requests the relay cannot pay waits for the relay's own sync, and one it turns away with nothing, its key at its limit, is booked for when that sync is due back. The key's object then has the relays, not the isolates, for peers. The same scenarios at 512 isolates as \`aggregate: "location"\`, and at 512 and 4,096 as the default, \`aggregate: "auto"\`, whose relays are its continents' (forwarding → pooled; a \`proto-cpool-\` isolate syncs through its continent's relay from its first sync to its last, as \`"continent"\` has it):`,
      "",
      table(["scenario", "max window ÷ limit or token excess", "calls/s peak", "under-admission", "waited", "wait p50 / p99"], rows),
      "",
      summary,
      "",
    );
  }
  return out;
}

/** A run's relay figures: set on every run that used a relay. */
const relaysOf = (r: ScenarioResult) => r.detail.relay!;

/** The relay runs' columns beside the scenario table's, "—" for a run that used no relay (a default key that never reported a crowd). */
const RELAY_COLUMNS: Extra = {
  headers: ["relay calls/s peak", "relay calls", "syncs per batch", "busiest relay busy"],
  cells: (r) => (r.detail.relay ? [n(relaysOf(r).callsPerSecondPeak), n(relaysOf(r).calls), relaysOf(r).syncsPerBatch.toFixed(2), percent(relaysOf(r).busy)] : ["—", "—", "—", "—"]),
};

/** What went wrong at the relays of `rows`, summed: "the relays refused … that way." */
function relayTrouble(rows: ScenarioResult[]): string {
  const sum = (f: (r: ScenarioResult) => number) => n(rows.reduce((a, r) => a + f(r), 0));
  return (
    `the relays refused ${sum((r) => relaysOf(r).refused)} syncs for a full queue, ${sum((r) => relaysOf(r).timedOut)} batches outlived their timeout, ${sum((r) => relaysOf(r).overloaded)} calls found a relay overloaded ` +
    `and relays restarted ${sum((r) => relaysOf(r).restarts)} times, ${sum((r) => r.detail.errorsByKind.reset)} requests getting onError's answer for a sync lost twice that way.`
  );
}

/** The relay family: its own table with the relays' figures, and each scenario beside the same one without relays. */
export function relaySection(rows: ScenarioResult[], all: ScenarioResult[], charts: ChartSpec[]): string[] {
  // A scenario in MANY_LOCATIONS is set beside the same relays in LOCATIONS.
  const pairs = rows.map((r) => ({ r, d: all.find((x) => (inManyLocations(r.name) ? `${x.name}-l${MANY_LOCATIONS}` === r.name : relayOf(x.name) === r.name && x.family !== "relay")) }));
  return [
    "## Relays: `aggregate: \"location\"`",
    "",
    `The global keys at 512 and 4,096 isolates, and the churn stress's sliding window, again with the rule's \`aggregate: "location"\` (src/fast/relay.ts, src/durable-object/relay.ts), the alternative to the default's continental relays ([above](#the-default-aggregate-auto)): each isolate syncs through its location's relay, which sends the syncs waiting there to the key's object as one \`syncAll\`, one batch in flight, at most ${RELAY_BATCH} syncs each, and refuses a sync at once when ${n(RELAY_QUEUE)} wait. ` +
      `Batches leave a relay at least its gap apart: ${RELAY_GAP_MS} ms (\`RELAY_GAP_MS\`) until the key's object answers one, then what the object asks for, its share of ${RELAY_CALLS_PER_SECOND} calls a second among the relays it heard from in the last ${RELAY_ACTIVE_MS / 1000} s, at most ${MAX_RELAY_GAP_MS} ms (\`relayGap\`, \`RelayBook\`). ` +
      `The isolates sit in ${LOCATIONS} locations, so the key's object hears from at most ${LOCATIONS} relays, each at most once per ${relayGap(LOCATIONS)} ms once paced: ${n((LOCATIONS * 1000) / relayGap(LOCATIONS))} calls a second at most. ` +
      `The \`-l${MANY_LOCATIONS}\` scenarios repeat those at 4,096 isolates in ${MANY_LOCATIONS} locations (about Cloudflare's count), where each relay hears fewer syncs and the object's pace allows up to ${n((MANY_LOCATIONS * 1000) / relayGap(MANY_LOCATIONS))} calls a second. ` +
      "*calls/s peak* and *calls per 100* count the key's object's calls (the batches); *waited* counts requests that waited on a sync through their relay; *relay calls/s peak* is the busiest relay's busiest second after the warm-up, *relay calls* all the isolates' calls to their relays, *syncs per batch* their mean over the batches. " +
      `A relay sends a sync at once when it has sent nothing for its gap, and no relay here took more than ${n(Math.max(...rows.map((r) => relaysOf(r).callsPerSecondPeak)))} calls in a second after the warm-up, so few syncs met in a batch: ${span(rows, (r) => relaysOf(r).syncsPerBatch, (x) => x.toFixed(2))} a batch on average. ` +
      `Over these runs ${relayTrouble(rows)}`,
    "",
    scenarioTable(rows, RELAY_COLUMNS),
    "",
    `Each beside the same scenario without relays (\`aggregate: "none"\` → \`aggregate: "location"\`), and each \`-l${MANY_LOCATIONS}\` beside the same relays in ${LOCATIONS} locations (${LOCATIONS} → ${MANY_LOCATIONS}):`,
    "",
    table(
      ["scenario", "max window ÷ limit or token excess", "calls/s peak", "calls per 100", "under-admission", "waited", "errors"],
      pairs.map(({ r, d }) => [
        `\`${r.name}\``,
        beside(d, r, boundText),
        beside(d, r, (x) => n(x.objectCallsPerSecondPeak)),
        beside(d, r, (x) => x.objectCallsPer100Requests.toFixed(2)),
        beside(d, r, (x) => percent(x.underAdmission)),
        beside(d, r, (x) => percent(x.waitedForObject)),
        beside(d, r, (x) => n(x.errors)),
      ]),
    ),
    "",
    img(charts, "relay-flash"),
  ];
}

/** The default's family (`aggregate: "auto"`): its own table with the relays' figures, and each scenario beside `aggregate: "none"`'s and the location relays'. */
export function autoSection(rows: ScenarioResult[], all: ScenarioResult[]): string[] {
  const relays = CONTINENTS.length;
  const named = (name: string) => all.find((x) => x.name === name);
  // An auto scenario's location relays are its name with `relay-` for `auto-`; the repeat in MANY_LOCATIONS first, where the auto scenarios run.
  const runs = rows.map((r) => {
    const location = r.name.replace(/^auto-/, "relay-");
    return { r, d: all.find((x) => autoOf(x.name) === r.name && x.family !== "auto"), l: named(`${location}-l${MANY_LOCATIONS}`) ?? named(location) };
  });
  // Where the key's object saw a crowd its isolates turned to relays; below it only a global key's first syncs took one.
  const crowded = rows.filter((r) => r.detail.objectMaxPeers >= AUTO_RELAY_PEERS);
  const few = rows.filter((r) => !crowded.includes(r));
  const withRelays = rows.filter((r) => r.detail.relay);
  const locations = runs.flatMap(({ l }) => (l ? [l] : []));
  const nones = runs.flatMap(({ r, d }) => (d && crowded.includes(r) ? [d] : []));
  const batch = (r: ScenarioResult) => relaysOf(r).syncsPerBatch;
  const calls = (r: ScenarioResult) => r.objectCallsPerSecondPeak;
  const most = (list: ScenarioResult[], f: (r: ScenarioResult) => number) => [...list].sort((a, b) => f(b) - f(a))[0];
  const busiest = most(withRelays, (r) => relaysOf(r).callsPerSecondPeak);
  const coldest = most(withRelays, (r) => relaysOf(r).callsPerSecondPeakWithWarmup);
  // The cold start that hit `aggregate: "none"` hardest, and the default's on the same traffic.
  const cold = most(
    runs.flatMap(({ r, d }) => (d && crowded.includes(r) ? [d] : [])),
    (d) => d.detail.objectCallsPerSecondPeakWithWarmup,
  );
  const coldObject = cold && runs.find(({ d }) => d === cold)?.r;
  const failing = rows.filter((r) => r.errors > 0);
  const whyFailed = (r: ScenarioResult) =>
    Object.entries(r.detail.errorsByKind)
      .filter(([, v]) => v > 0)
      .map(([kind, v]) => `${kind} ${n(v)}`)
      .join(", ");
  const inLocations = (many: boolean) => locations.filter((l) => inManyLocations(l.name) === many);
  const against = [
    nones.length && `${span(nones, calls, n)} with \`aggregate: "none"\``,
    inLocations(false).length && `${span(inLocations(false), calls, n)} through location relays in ${LOCATIONS} locations`,
    inLocations(true).length && `${span(inLocations(true), calls, n)} in ${MANY_LOCATIONS}`,
  ].filter(Boolean);
  const fewText = few.length
    ? `Below ${AUTO_RELAY_PEERS} only each isolate's first sync goes through a relay and the rest straight, as with \`aggregate: "none"\`: ${[...new Set(few.map((r) => r.isolates))]
        .sort((a, b) => a - b)
        .map((i) => {
          const at = few.filter((r) => r.isolates === i);
          return `at ${n(i)} isolates the key's object held at most ${n(Math.max(...at.map((r) => r.detail.objectMaxPeers)))} peers, and the relays took ${span(at, (r) => r.detail.relay?.calls ?? 0, n)} syncs in a run, against ${span(at, (r) => r.detail.isolatesBorn, n)} isolates that lived in it`;
        })
        .join("; ")}. `
    : "";
  return [
    "## The default: `aggregate: \"auto\"`",
    "",
    `The global keys, the cost runs at 8 isolates and the churn stress again with the rule's default, \`aggregate: "auto"\` (src/fast/relay.ts \`firstThroughRelay\`, \`crowded\`, \`syncsThrough\`): an isolate syncs a key through its continent's relay (\`request.cf.continent\`), the same relay code as \`aggregate: "location"\`, while an answer says ${AUTO_RELAY_PEERS} isolates or more sync with it, and until one says ${AUTO_DIRECT_PEERS} or fewer; otherwise straight to the key's object. ` +
      `A key new to an isolate makes its first sync through the relay when its rule has one key for every request (\`key: "global"\`, as here), which every isolate shares, and straight otherwise; a failed sync is retried through the relay. ` +
      `Its isolates sit in ${MANY_LOCATIONS} locations over ${relays} continents. ${fewText}` +
      (crowded.length
        ? `Past it, it cuts the key's object's calls twice over. The key's object hears from at most ${relays} relays, so it paces each at the shortest gap, ${relayGap(relays)} ms: ${n((relays * 1000) / relayGap(relays))} batches a second at most, however many locations there are. ` +
          `Location relays in ${MANY_LOCATIONS} locations would each need a gap of ${n(Math.ceil((MANY_LOCATIONS * 1000) / RELAY_CALLS_PER_SECOND))} ms to keep within ${RELAY_CALLS_PER_SECOND} calls a second, but the gap stops at ${MAX_RELAY_GAP_MS} ms (\`MAX_RELAY_GAP_MS\`, so a sync is still answered in time), which lets them send up to ${n((MANY_LOCATIONS * 1000) / relayGap(MANY_LOCATIONS))} a second; ${relays} relays never reach that cap. ` +
          `And each relay hears a whole continent's syncs, so more of them meet in a batch: ${span(crowded, batch, (x) => x.toFixed(2))} a batch on average${locations.length ? `, against ${span(locations, batch, (x) => x.toFixed(2))} through the location relays beside them` : ""}. `
        : "") +
      "The relay columns read as for the location relays: the busiest relay's busiest second after the warm-up, the isolates' calls to their relays, the mean syncs a batch, the busiest relay's busy share of its thread (— where no relay was used).",
    "",
    scenarioTable(rows, RELAY_COLUMNS),
    "",
    `Each beside the same scenario with \`aggregate: "none"\` and through location relays (\`aggregate: "none"\` → \`aggregate: "location"\` → \`aggregate: "auto"\`); the location relays' run is the \`-l${MANY_LOCATIONS}\` repeat where one ran, in the same ${MANY_LOCATIONS} locations as the default's scenarios, otherwise the run in ${LOCATIONS} (*location relays in*; — where none ran):`,
    "",
    table(
      ["scenario", "location relays in", "max window ÷ limit or token excess", "calls/s peak", "under-admission", "waited", "wait p50 / p99", "errors"],
      runs.map(({ r, d, l }) => [
        `\`${r.name}\``,
        l ? n(inManyLocations(l.name) ? MANY_LOCATIONS : LOCATIONS) : "—",
        beside([d, l], r, boundText),
        beside([d, l], r, (x) => n(x.objectCallsPerSecondPeak)),
        beside([d, l], r, (x) => percent(x.underAdmission)),
        beside([d, l], r, (x) => percent(x.waitedForObject)),
        beside([d, l], r, waitText),
        beside([d, l], r, (x) => n(x.errors)),
      ]),
      ["l", "r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
    ...(crowded.length && busiest && coldest && cold && coldObject
      ? [
          `Where the key's object saw a crowd, it took ${span(crowded, calls, n)} calls in its busiest second${against.length ? `, against ${against.join(" and ")}` : ""}. ` +
            `At the cold start, when every isolate makes its first sync at once (as after a deploy), \`${coldObject.name}\`'s object took ${n(coldObject.detail.objectCallsPerSecondPeakWithWarmup)} calls in its busiest second and ${n(coldObject.errors)} requests got onError's answer, ` +
            `against ${n(cold.detail.objectCallsPerSecondPeakWithWarmup)} and ${n(cold.errors)} with \`aggregate: "none"\` (\`${cold.name}\`): a global key's first syncs come in its continents' batches, ${n(relaysOf(coldObject).callsPerSecondPeakWithWarmup)} in the busiest relay's busiest second.`,
          "",
          `**The limitation: one relay per continent takes every sync of that continent's isolates for the key.** The busiest continental relay here took ${n(relaysOf(busiest).callsPerSecondPeak)} calls in its busiest second after the warm-up (\`${busiest.name}\`, busy ${percent(relaysOf(busiest).busy)} of its thread), ` +
            `and ${n(relaysOf(coldest).callsPerSecondPeakWithWarmup)} counting the warm-up (\`${coldest.name}\`)${locations.length ? `; no location relay beside them took more than ${n(Math.max(...locations.map((l) => relaysOf(l).callsPerSecondPeakWithWarmup)))}, warm-up included` : ""}. ` +
            `A relay is an object too, at ${SERVICE.baseMs} ms an isolate's call about ${n(1000 / SERVICE.baseMs)} calls a second (Cloudflare's soft limit per object): a key whose one continent sends it more syncs a second than that makes its continent's relay the hot object, queueing, then refusing syncs (at ${n(RELAY_QUEUE)} waiting) or answering "overloaded", where location relays spread the same syncs over the continent's locations. ` +
            `${failing.length ? `Requests that got onError's answer with the default: ${failing.map((r) => `\`${r.name}\` ${n(r.errors)} (${whyFailed(r)})`).join(", ")}.` : "No request of the default's runs got onError's answer."} ` +
            `Over these runs ${relayTrouble(withRelays)}`,
          "",
        ]
      : []),
  ];
}
