/** bench/SIMULATION.md: the targets with verdicts, the model and where its figures come from, one section per family, and how to reproduce. */
import { percent, table } from "../lib/stats";
import type { ChartSpec } from "../lib/section";
import { CONTINENT_RTT, continentAt, CONTINENTS, JITTER, MIXED_RTT, RELAY_RTT } from "./latency";
import { longestCycle, reorderBound } from "./bound";
import { OVERLOAD, SERVICE } from "./object";
import type { JobResult } from "./pool";
import { QUIET_GAPS, QUIET_UNTIL_INTERVALS, RATE_BASIS } from "../../src/fast/lease";
import { POOL_LEASE_MS } from "./pool-relay";
import { PEER_TTL_MS } from "../../src/fast/peer";
import { MAX_RELAY_GAP_MS, RELAY_ACTIVE_MS, RELAY_BATCH, RELAY_CALLS_PER_SECOND, RELAY_GAP_MS, RELAY_QUEUE, relayGap } from "../../src/fast/relay";
import { MAX_CALLS_PER_SECOND, SATURATED_UNITS_PER_CALL, SATURATION } from "../../src/fast/schedule";
import { AGREEMENT, continentOf, FULL, inManyLocations, LIFETIME_MS, LOCATIONS, MANY_LOCATIONS, QUICK, relayOf, STRESS_LIFETIME_MS, type Scenario } from "./scenarios";
import type { ScenarioResult } from "./summary";
import { WAIT_CAUSES, type WaitCause } from "./isolate";
import { callKinds, readByTargets, rerunOnSeeds, type SeedVerdicts, type Verdict } from "./targets";

export interface RunInfo {
  command: string;
  /** the commit measured, and whether src/ differed from it */
  source: string;
  seed: number;
  quick: boolean;
  seconds: number;
  startedAt: string;
  machine: string;
  jobs: number;
}

const n = (x: number) => Math.round(x).toLocaleString("en-US");
const f3 = (x: number | null) => (x === null ? "—" : x.toFixed(3));
const img = (charts: ChartSpec[], file: string) => {
  const c = charts.find((x) => x.file === file);
  return c ? `![${c.title}](charts/simulation/${c.file}.svg)\n\n` : "";
};

/** Columns a family's table adds to the scenario table's. */
interface Extra {
  headers: string[];
  cells(r: ScenarioResult): string[];
}

/** One row per scenario, the issue's fields first. */
function scenarioTable(rows: ScenarioResult[], extra?: Extra): string {
  return table(
    ["scenario", "isolates", "load", "traffic", "max window ÷ limit", "token excess", "under-admission", "calls/s peak", "calls per 100", "waited", "wait p50 / p99", "errors", "object busy", "peers", ...(extra?.headers ?? [])],
    rows.map((r) => [
      `\`${r.name}\``,
      n(r.isolates),
      `${r.load}×`,
      r.detail.traffic,
      f3(r.maxPerWindowOverLimit),
      f3(r.tokenExcess),
      percent(r.underAdmission),
      n(r.objectCallsPerSecondPeak),
      r.objectCallsPer100Requests.toFixed(2),
      percent(r.waitedForObject),
      waitText(r),
      n(r.errors),
      percent(r.detail.objectBusy),
      n(r.detail.objectMaxPeers),
      ...(extra?.cells(r) ?? []),
    ]),
    ["l", "r", "r", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", ...(extra?.headers.map(() => "r" as const) ?? [])],
  );
}

/** A figure of a run beside the same figure of one or more others, "before → after" ("—" for a run that did not happen). */
function beside(before: ScenarioResult | undefined | (ScenarioResult | undefined)[], after: ScenarioResult, f: (x: ScenarioResult) => string): string {
  return [...[before].flat(), after].map((x) => (x ? f(x) : "—")).join(" → ");
}

/** The range of a figure over runs, "lo–hi" (one value when they agree, "—" for none). */
function span(rows: ScenarioResult[], f: (x: ScenarioResult) => number, format: (x: number) => string): string {
  if (!rows.length) return "—";
  const [lo, hi] = [Math.min(...rows.map(f)), Math.max(...rows.map(f))];
  return lo === hi ? format(lo) : `${format(lo)}–${format(hi)}`;
}

/** A run's bound as its algorithm reads it: the most in a window ÷ limit (sliding window), or the token excess. */
function boundText(r: ScenarioResult): string {
  return r.maxPerWindowOverLimit !== null ? f3(r.maxPerWindowOverLimit) : f3(r.tokenExcess);
}

/** How long the requests that waited waited, "12 / 340 ms" (median / 99th percentile), or "—" when none did. */
function waitText(r: ScenarioResult): string {
  const w = r.detail.waitMs;
  return w ? `${Math.round(w.p50)} / ${Math.round(w.p99)} ms` : "—";
}

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

export function renderReport(jobs: JobResult[], scenarios: Scenario[], info: RunInfo, verdicts: Verdict[], charts: ChartSpec[], seeds: SeedVerdicts[] = []): string {
  const results = jobs.flatMap((j) => (j.ok ? [j.result] : []));
  const failed = jobs.filter((j): j is Extract<JobResult, { ok: false }> => !j.ok);
  const family = (f: string) => results.filter((r) => r.family === f);
  const out: string[] = [];
  const met = verdicts.filter((v) => v.met === true).length;
  const read = verdicts.filter((v) => v.met !== undefined).length;

  out.push(
    "# floodgate at internet scale, simulated",
    "",
    `Generated by \`${info.command}\` on ${info.startedAt}: ${info.quick ? "**quick run** (shorter runs, fewer variants: indicative only)" : "full run"}, seed ${info.seed}, ` +
      `${scenarios.length} scenarios (${failed.length} failed) in ${info.seconds.toFixed(0)} s of wall time on ${info.machine} (${info.jobs} worker thread${info.jobs === 1 ? "" : "s"}); floodgate at ${info.source}.`,
    "",
    `A deterministic discrete-event simulation that drives floodgate's own code: the algorithms, the fast path's isolate side and the object's lease logic are imported from \`src/\`, not re-implemented, ` +
      `so the simulation cannot drift from the product. It measures **floodgate as \`src/\` has it** against the targets of issue #13: its default design, and a fast rule with \`aggregate: "continent"\` (each continent's relay forwarding its isolates' syncs to the key's object in batches; [below](#continental-relays-aggregate-continent)) at 512 and 4,096 isolates, where the README recommends it, with the alternative, \`aggregate: "location"\` (a relay per location; [below](#relays-aggregate-location)), measured too. Two simulator-only **prototypes** (strict calls that carry their deadline; relays that hold a lease for their location) are measured beside it ([below](#prototypes-simulator-only)). ` +
      `The raw numbers are in [\`simulation.json\`](simulation.json).`,
    "",
    `**The fast-mode design measured.** Each key's object books every isolate's next sync from one call budget per key (src/fast/schedule.ts: at most ${MAX_CALLS_PER_SECOND} booked calls a second: each booking at least one sync interval away and one budget step after the last). ` +
      `A key asked for more than ${SATURATION} × what it sustains, whose free units would not last an interval, is saturated: its booked calls are spaced to hand out about ${SATURATED_UNITS_PER_CALL} units each, but each isolate still calls at least 4 times a period and at least once a minute. ` +
      `A lease lasts until the isolate's booked call plus half an interval (a quiet isolate's, seven of its mean gaps between requests, no later than ten intervals from the grant or four past a call booked further off, since it calls with its first request after that time unless its lease runs low) and is sized to its demand until then (mean + √mean, the demand read over one interval and over ${RATE_BASIS} units at least, unless a count the earlier rate could not plausibly have produced shows it moved: \`demandRate\`); every caller gets its share of the larger of what is free now and what the key frees until its next call, the latter with room for bursts (two standard deviations of a Poisson count of that share, at most the share of what the key frees while the call is answered: \`fairShare\`), and a key far from its limit spares a cold isolate at most 8 times its demand (\`grantLease\`, src/fast/lease.ts). Each sync says what the isolate's leases will still hold when the answer comes (what they hold less its demand over its last round trip, unrounded), and the grant tops that up, rounded up once, rather than coming on top of it; the isolate keeps its earlier leases, which the grant renews to end with the new one, and spends them first. ` +
      "The isolate syncs in the background when its booked time comes (with its first request after it or, when its lease runs low, on a timer set one round trip before it: `onTimeCallAt`, `callOnTime`), or sooner only if its lease would run out before it; a saturated key's emptied lease denies from the isolate's cache until its booked call (`syncDue`, `decideLocally`, src/fast/local.ts). " +
      "What onError admits while the object cannot be reached is reported with the next sync and counted by the object then (`SyncRequest.unleased`); onError `local` starts from the isolate's share of what the object last said was free, and refuses while none of the rule's objects has answered the isolate (src/limiter/local-share.ts). " +
      `The object keeps one SQLite row per peer, so a sync writes its own isolate's row, not every peer; it reads the peers' pins, demand and policies from running figures kept as their rows change (src/fast/peer-index.ts), not by walking them, and a peer is forgotten ${PEER_TTL_MS / 1000} s after its last or booked sync.`,
    "",
    "## Targets",
    "",
    `${met} of ${read} met.`,
    "",
    "Each target is read for the design the README recommends at each isolate count: the default up to 64 isolates, `aggregate: \"continent\"` at 512 and 4,096 (where its scenarios ran; `aggregate: \"location\"`, the alternative, is measured beside it below); the verdict says which design's figures decided it.",
    "",
    table(
      ["target", "measured", "verdict"],
      verdicts.map((v) => [v.target, v.measured, `${v.met === undefined ? "not read" : v.met ? "met" : "**missed**"}${v.basis ? `: ${v.basis}` : ""}`]),
    ),
    "",
    ...verdicts.filter((v) => v.why).flatMap((v) => [`- **${v.met ? "Met only with `aggregate: \"continent\"`; the default misses" : "Missed"}: ${v.target}.** ${v.why}`]),
    "",
    ...acrossSeeds(seeds, scenarios.filter((s) => readByTargets(s) && !rerunOnSeeds(s)).map((s) => s.name)),
    ...boundSection(family("global-fast")),
  );
  if (failed.length) {
    out.push("## Failed scenarios", "", "These scenarios did not run to the end; their error is below and they are missing from every table.", "");
    for (const f of failed) out.push(`- \`${f.name}\` (${f.seconds} s): \`${f.error.split("\n")[0]}\``);
    out.push("");
  }

  out.push(...findings(results));
  out.push(...modelSection());

  const global = family("global-fast");
  if (global.length) {
    out.push(
      "## Global fast keys",
      "",
      "One global key (`key: global`), fast mode, default sync (1 s), timeout (1 s), 60 buckets and onError (`local`), every isolate sending it traffic. " +
        "1× and 10× its limit with requests spread evenly over the isolates, 10× spread by Zipf's law over isolates (below 512 isolates; isolate k receives a share ∝ 1/(k+1)), and a flash crowd: the limit's rate, then within 5 s ten times it for a third of the run, skewed likewise.",
      "",
      scenarioTable(global),
      "",
      img(charts, "calls-per-second") + img(charts, "over-admission") + img(charts, "waited") + img(charts, "flash-crowd"),
    );
  }
  const at8 = family("calls-at-8");
  if (at8.length) out.push("## 8 isolates at 10×: calls per 100 requests", "", "The issue's cost target, on its two limits, spread evenly over 8 isolates.", "", scenarioTable(at8), "");
  const agreement = family("agreement");
  if (agreement.length) {
    const a = AGREEMENT;
    out.push(
      "## Checked against workerd",
      "",
      `\`test/harness/scale-agreement.test.ts\` runs this scenario in workerd too: ${a.isolates} front Workers of the built bundle in Miniflare, each ${a.rttMs} ms from the real RateLimiter and its SQLite storage (a fixture waits half the round trip before each call and half after), the same rule (${a.limit} per ${a.periodMs / 1000} s, sliding window, fast, a ${a.timeoutMs / 1000} s timeout so a stalled test machine does not hand requests to onError) and traffic, the origin counting what arrives. ` +
        `It requires both bounds at most the limit (workerd's allowing for requests still on their way to the origin at a window's edge) and within ±${a.boundTolerance} of the limit of each other, and workerd's object calls, a second after the ${a.warmupMs / 1000} s warm-up and per 100 requests, within a factor of ${a.callRateFactor} of the simulation's (on 2 shared cores they came within 2.3 %, and the simulation's seeds spread 2 %).`,
      "",
      scenarioTable(agreement),
      "",
    );
  }
  const churn = family("churn");
  if (churn.length) {
    out.push(
      "## Isolates vanishing with their leases",
      "",
      `512 isolates that live ${STRESS_LIFETIME_MS / 1000} s on average instead of ${LIFETIME_MS / 60_000} minutes: each vanishes with its lease unreported and its requests in flight (counted as lost, not admitted), and a fresh isolate takes its traffic.`,
      "",
      scenarioTable(churn),
      "",
    );
  }
  const relay = family("relay");
  if (relay.length) out.push(...relaySection(relay, results, charts));
  const continent = family("continent");
  if (continent.length) out.push(...continentSection(continent, results));
  const perClient = family("per-client");
  if (perClient.length) {
    out.push(
      "## 100,000 per-client keys",
      "",
      "A per-client rule (`header:x-client`), fast mode, 600 per minute per key; keys drawn by Zipf's law (s = 1), the hottest at 10× its limit, most seen a few times. Each key's traffic lands on 2 isolates (a client sits in one place), each with its own object. Figures are per key where the issue says so (the worst key), otherwise over all keys.",
      "",
      scenarioTable(perClient),
      "",
    );
  }
  out.push(...strictSections(family("strict-ceiling"), family("strict-rtt"), family("strict-limited"), charts));
  const proto = family("prototype");
  if (proto.length) out.push(...prototypeSection(proto, results));

  out.push(
    "## Reproduce",
    "",
    "```sh",
    "npm ci",
    `${info.command}`,
    "npm run simulate -- --quick            # under a minute: shorter runs, fewer variants",
    "npm run simulate -- --only global-fast --isolates 8,64   # one family, chosen isolate counts",
    "```",
    "",
    "The same seed gives the same `scenarios` in `simulation.json`, whatever the machine or the number of worker threads (each scenario draws from its own streams, seeded by its name). " +
      "The simulator lives in [`bench/simulation/`](simulation/); `test/harness/simulate.test.ts` checks it runs, is deterministic and refuses bad options.",
    "",
  );
  return out.join("\n");
}

/** Both 1× targets beside two idealized bounds (./bound.ts): a lease refilled on a fixed cycle, and one refilled at a reorder point. */
function boundSection(global: ScenarioResult[]): string[] {
  const at1x = global.filter((r) => r.load === 1 && r.algorithm === "sliding-window");
  if (!at1x.length) return [];
  const { limit, periodMs } = at1x[0]!.detail;
  const perSecond = (limit * 1000) / periodMs;
  const asRun = (r: ScenarioResult) => [n(r.isolates), percent(r.underAdmission), percent(r.waitedForObject)];
  const cycles = at1x.map((r) => {
    const bound = longestCycle(r.isolates, perSecond, limit, 0.05);
    return [...asRun(r), ...(bound ? [`${n(bound.cycleMs)} ms`, n(bound.lease), n(bound.syncsPerSecond), bound.syncsPerRequest.toFixed(2)] : ["none up to 10 s", "—", "—", "—"])];
  });
  const reorders = at1x.map((r) => {
    const b = reorderBound(r.isolates, perSecond, limit, MAX_CALLS_PER_SECOND, LIFETIME_MS);
    const [lo, hi] = b.reorder;
    return [...asRun(r), n(b.refill), n(b.callsPerSecond), lo === hi ? n(lo) : `${n(lo)}–${n(hi)}`, b.held.toFixed(2), percent(b.underAdmission), percent(b.underAdmission + b.vanished), percent(b.waited)];
  });
  return [
    "### What both 1× targets would take of an idealized lease",
    "",
    "Two bounds, not measurements (bench/simulation/bound.ts), each set beside the sliding window at 1× as run (the default design). " +
      `In both, a request the lease cannot pay for waits on a call, at most 1 % of requests may (Poisson demand, ${n(perSecond)} requests a second, the limit's rate, shared evenly), ` +
      "and at a key held at its limit (1×: its demand is its limit) every unit an isolate holds unspent is one the others are refused. " +
      `Each call is a Durable Object request, through a relay or not; the key's object books ${MAX_CALLS_PER_SECOND} a second, and strict mode decides with at most one call a request.`,
    "",
    "**Refilled on a fixed cycle**, as floodgate's booked calls refill leases: every isolate is refilled at the start of each cycle to the same lease, at once and with no call in flight, which no real design does. " +
      "The lease is the smallest that keeps waits within 1 %, and an isolate holds at least the lease less half a cycle's demand unspent on average. " +
      "The table gives the longest cycle under which that keeps under-admission within 5 %, and the calls a second it takes of the key's isolates together. " +
      "Where it needs more than one call a request, no lease refilled on a fixed cycle meets both targets at less than strict mode's cost; the 1 % of waits leaves out each new isolate's first request, which waits whatever the lease (see the missed targets above).",
    "",
    table(["isolates", "under-admission as run", "waited as run", "longest cycle", "lease", "calls a second", "calls a request"], cycles),
    "",
    "**Refilled at a reorder point** (continuous review, inventory models' (r, Q) policy): an isolate asks for a refill when what it holds and has asked for falls to its reorder point, and the refill comes one round trip later (its own, drawn from the mixture the scenarios use), from an object that always has units to give, which a key held at its limit does not: its object has only what the window frees. " +
      `Each refill brings the fewest units that keep the calls within the ${MAX_CALLS_PER_SECOND} a second the object books, and each isolate's reorder point is raised where a unit held cuts the most waiting until at most 1 % of requests wait. ` +
      `What the isolates hold is refused to the others, and what each takes with it when it vanishes (every ${LIFETIME_MS / 60_000} minutes on average) is counted as spent on top. ` +
      "Up to 512 isolates this meets both targets, so they do not conflict for every design: a lease refilled when it runs low need not cover a whole cycle's swings in demand. floodgate's early top-up, when a lease would run out before its booked call, goes part of that way; one tried on top of the booked calls (a sync whenever the lease fell to its reorder point, and grants sized to it) cut waits at 8 and 64 isolates but raised under-admission at 512, as the booked calls still topped the leases up each cycle and a key at its limit cut grants short.",
    "",
    table(["isolates", "under-admission as run", "waited as run", "refill", "calls a second", "reorder point", "held an isolate", "under-admission", "with vanishing", "waited"], reorders),
    "",
  ];
}

/** The targets read again on each further seed (the scenarios named in `once` on the first seed only): one column a seed, and which verdicts differ. */
function acrossSeeds(seeds: SeedVerdicts[], once: string[]): string[] {
  if (seeds.length < 2) return [];
  const [first] = seeds as [SeedVerdicts, ...SeedVerdicts[]];
  const on = (s: SeedVerdicts, target: string) => s.verdicts.find((v) => v.target === target)?.met;
  const mark = (met: boolean | undefined) => (met === undefined ? "not read" : met ? "met" : "**missed**");
  const differing = first.verdicts.filter((v) => seeds.some((s) => on(s, v.target) !== v.met));
  const read = first.verdicts.filter((v) => v.met !== undefined).length;
  const failed = seeds.slice(1).flatMap((s) => s.failed.map((name) => `\`${name}\` (seed ${s.seed})`));
  return [
    "### The same targets on other seeds",
    "",
    `Every scenario the targets read ran again with seed${seeds.length > 2 ? "s" : ""} ${seeds.slice(1).map((s) => s.seed).join(", ")}${once.length ? ` but the per-client keys' (${once.map((name) => `\`${name}\``).join(", ")}: a tenth of the run's time, and their busiest key takes a few calls a second, far from every bound; they are read on seed ${first.seed} only)` : ""}, and the targets were read on each seed's runs as on seed ${first.seed}'s above (each seed's figures are in \`simulation.json\`, \`acrossSeeds\`). ` +
      `Met: ${seeds.map((s) => `${s.verdicts.filter((v) => v.met === true).length} of ${read} on seed ${s.seed}`).join(", ")}. ` +
      (differing.length ? `Not the same on every seed: ${differing.map((v) => v.target).join("; ")}.` : "Every verdict is the same on every seed.") +
      (failed.length ? ` Failed on a further seed, and left out of its reading: ${failed.join(", ")}.` : ""),
    "",
    table(["target", ...seeds.map((s) => `seed ${s.seed}`)], first.verdicts.map((v) => [v.target, ...seeds.map((s) => mark(on(s, v.target)))])),
    "",
  ];
}

/** How many of the continent scenarios' MANY_LOCATIONS locations are on continent `code`. */
function continentLocations(code: string): number {
  return Array.from({ length: MANY_LOCATIONS }, (_, k) => continentAt(k, MANY_LOCATIONS)).filter((c) => c === code).length;
}

function modelSection(): string[] {
  return [
    "## The model",
    "",
    "**What runs is floodgate's.** Each rule is built by floodgate's config parser (`parseConfig`), so sync interval, timeout, buckets and onError are the product's defaults. " +
      "Each isolate keeps real `LocalKey`s and calls `freshKey`, `decideLocally`, `fromLease`, `syncDue`, `nextSync`, `applyLease`, `syncFailed`, `admittedUnleased` and `surrender` (src/fast/local.ts) on floodgate's own `LruTable`; " +
      "a rule with `aggregate: \"location\"` or `\"continent\"` names its location's or its continent's relay with `relayFor`, and each relay queues and batches with floodgate's own `RelayQueue` (src/fast/relay.ts); " +
      "each key's object calls `grantLease` (src/fast/lease.ts), `leasePolicy`, `settlePins`, `putPeer`, `removePeer` on its peer index (src/fast/peer-index.ts), `isLive`, `lastPinEnds` (src/fast/peer.ts) and the algorithms' `decide`, `peek`, `carryOver`; strict isolates use floodgate's `DenialCache`, `Breakers` and `RuleBreaker`. " +
      "What cannot be imported is mirrored in a few lines, each naming the lines it mirrors: the object's `sync`, `syncAll`, `decide` and `alarm` bodies (src/durable-object/rate-limiter.ts extends `DurableObject` from `cloudflare:workers`, which Node cannot load), the relay's `forward`, `pump` and `send` (src/durable-object/relay.ts, on timers and promises), " +
      "the promise-and-`Date.now()` shells of src/fast/index.ts (`decideFast`, `sync`, `sweep`, `flushEvicted`) and of src/strict/coalescer.ts and index.ts, and onError's `local` answer (its table is module state, one per isolate). Time is a parameter of every floodgate function, so the simulated clock drives them directly.",
    "",
    "**Round trips.** Each isolate draws its round trip to the key's object once, from this mixture; each leg of each call is half of it times a uniform factor in " +
      `[${JITTER[0]}, ${JITTER[1]}]. A key's object lives in one data center, created near its first request, and does not move (Cloudflare's Durable Objects docs, *Data location*); every isolate elsewhere reaches it over the network. ` +
      "The bands are the issue's and agree with public city-to-city ping tables (WonderProxy, *Miles per Millisecond*: Milan–Zurich 11 ms, Paris–Milan 21 ms, Dallas–Fremont 44 ms, New York–Paris 78 ms, Baltimore–Sydney 251 ms, Paris–Sydney 349 ms). " +
      "Where the isolates of a region are, relative to one object, is an assumption: 40 / 45 / 15 %.",
    "",
    table(["share of isolates", "round trip", "where"], MIXED_RTT.map((b) => [percent(b.share), `${b.loMs}–${b.hiMs} ms`, b.label.replace(/ \(.*\)$/, "")])),
    "",
    `**The object** serves one call at a time. A call costs ${SERVICE.baseMs} ms of its thread: Cloudflare gives one object a soft limit of about 1,000 requests a second (Durable Objects *Limits* and FAQ, "How much work can a single Durable Object do?"). ` +
      "A sync writes only its own isolate's peer row (and the key's row when its state changed), so what it stores does not grow with the peers; " +
      "a sync reads the peers' figures from their index (src/fast/peer-index.ts) instead of walking them, measured in Node at 9.0 µs at 512 peers and 8.9 µs at 4,096 (a walk took 104 µs and 852 µs), so it costs no more with more peers; " +
      `an alarm, about once a minute, still walks them and costs ${SERVICE.alarmPerPeerMs * 1000} µs more per peer the object holds (measured: 0.14 ms at 512 peers, 0.96 ms at 4,096). The rows' writes themselves are not charged beyond the 1 ms. A strict batch costs ` +
      `${SERVICE.perDecisionMs * 1000} µs more per decision. Calls beyond one at a time wait in a queue; a call that finds ${OVERLOAD.maxQueued.toLocaleString("en-US")} calls queued, or more than ${OVERLOAD.maxWaitMs / 1000} s of work ahead, is refused at once, as Cloudflare's "Durable Object is overloaded" ` +
      "(its documented causes are too many requests queued and requests queued too long; the figures are not published, so these are assumptions). Alarms run on the same thread.",
    "",
    `**Relays** (\`aggregate: "location"\`). Isolate slot *k* runs at location *k* mod ${LOCATIONS} (an assumption: Cloudflare has about 300 locations; a key's traffic reaches fewer), and each location has one relay for the key, an object like the key's: one thread, ${SERVICE.baseMs} ms an isolate's call (its answer, handed out when its batch returns, included; sending a batch is not charged), the same queue and overload rule. ` +
      `An isolate's round trip to its relay is drawn once per location, uniform in ${RELAY_RTT.loMs}–${RELAY_RTT.hiMs} ms (an assumption: a relay object is created near the first request that names it, in a nearby data center that hosts Durable Objects; Durable Objects docs, *Data location*); the relay's round trip to the key's object is drawn once per location from the mixture above (its isolates' own, were they to call the key's object directly). ` +
      `A batch of *n* syncs (\`syncAll\`) costs the key's object ${SERVICE.baseMs} ms + ${SERVICE.perSyncMs * 1000} µs a sync (an assumption: the lease code measured 9 µs a sync, and each sync writes its peer row). ` +
      "An isolate that vanishes leaves its syncs at the relay, which still reach the key's object. A relay restarts after a lifetime drawn as an isolate's (an assumption: an object is evicted when idle, and on every deploy): every sync waiting there, queued or in its batch in flight, fails as Cloudflare's reset does, which the isolate tries once more (`retriedOnce`, to a fresh relay), and the key's object, which may have applied that batch, answers the resent syncs without applying them twice.",
    "",
    `**Continental relays** (\`aggregate: "continent"\`). The continent scenarios run their isolates in ${MANY_LOCATIONS} locations (slot *k* at location *k* mod ${MANY_LOCATIONS}), spread over the continents (\`request.cf.continent\`) by share of the locations, an assumption (roughly where Cloudflare's cities are): ` +
      `${CONTINENTS.map(({ code, share }) => `${code} ${+(share * 100).toFixed(1)} % (${continentLocations(code)} locations)`).join(", ")}. Each continent has one relay for the key. ` +
      `Continents are bands of distance from the key's object (\`placeOnContinents\`, bench/simulation/latency.ts): its nearest locations are ${CONTINENTS[0]!.code}'s, where the key's object lives (near its first request, likeliest on the continent with the most locations), the next nearest ${CONTINENTS[1]!.code}'s, and so on. ` +
      "Each continent's relay sits at one of its locations, drawn (it is created near the first request that names it), so its round trip to the key's object is that location's. " +
      `A location's round trip to its continent's relay is drawn once per location, uniform in ${CONTINENT_RTT.loMs}–${CONTINENT_RTT.hiMs} ms (an assumption: the relay is somewhere on the continent; WonderProxy, *Miles per Millisecond*: Milan–Zurich 11 ms, Paris–Milan 21 ms, Dallas–Fremont 44 ms, and a continent's far corners are further), and at least the difference between the location's and the relay's round trips to the key's object, as the triangle inequality asks. ` +
      "Otherwise as the location relays: the same object model for the relay and the key's object, the same batches, pacing, overload rule and restarts.",
    "",
    `**Isolates** live ${LIFETIME_MS / 60_000} minutes on average (exponential), then vanish with whatever they hold (leases unreported, syncs and requests in flight) and a fresh isolate at the same distance takes their traffic; the churn stress uses ${STRESS_LIFETIME_MS / 1000} s. ` +
      "Cloudflare documents that isolates are not necessarily long-lived and may be evicted for resource limits on the machine, the isolate's own limits, or suspicion (Workers docs, *How Workers works*), and publishes no lifetime: the figures are assumptions.",
    "",
    "**Traffic** is Poisson at the stated rate, every request costing 1 unit. *Steady*: a constant rate. *Flash crowd*: the limit's rate, ten times it within 5 s, held a third of the run, then back. *Skewed*: isolate *k* gets a share ∝ 1/(k+1). " +
      `A full run's fast scenarios last ${FULL.fastMs / 1000} s of simulated time (${FULL.fastLargeMs / 1000} s at 4,096 isolates, whose runs take most of the run time), ${FULL.fastMs / 60_000} periods of the global key: a window that starts empty first fills, and its waits and refusals begin only then, so the steady-state figures leave out its first period; ` +
      `the churn stress ${FULL.churnMs / 1000} s, strict runs ${FULL.strictMs / 1000} s; a quick run ${QUICK.fastMs / 1000} s (${QUICK.fastLargeMs / 1000} s at 4,096 isolates), the churn stress ${QUICK.churnMs / 1000} s and strict runs ${QUICK.strictMs / 1000} s, with a ${QUICK.fastWarmupMs / 1000} s warm-up and fewer variants and loads. ` +
      `The global key's limit is ${FULL.globalLimit.toLocaleString("en-US")} per 60 s (500 a second, 5,000 a second at 10×). Every run starts on a whole minute, so fixed windows are the algorithms' own.`,
    "",
    "**Measures.** *maxPerWindowOverLimit*: most admitted in one fixed window of the period ÷ limit (sliding window; the worst key). *tokenExcess*: the most admitted in any interval beyond burst + rate·t, ÷ limit (token bucket). " +
      "*underAdmission*: 1 − admitted ÷ what an exact limiter admits on the same traffic (floodgate's own algorithm deciding each request at its arrival, in one place, with no delay). " +
      `*objectCallsPerSecondPeak*: calls arriving at one key's object in its busiest second after the warm-up (a global fast key's first period, ${FULL.fastWarmupMs / 1000} s in a full run and ${QUICK.fastWarmupMs / 1000} s in a quick one; 10 s for per-client keys, 2 s strict; the cold start, when every isolate makes its first call, is in \`detail.objectCallsPerSecondPeakWithWarmup\`). ` +
      "*waitedForObject*: share of requests after the warm-up that waited on a call; *wait p50 / p99* (\`detail.waitMs\`): how long those waited, from arrival to decision, median and 99th percentile; in fast mode each of them by why it waited (\`detail.waitsByCause\`, *Why requests waited*). *errors*: requests that onError answered (a timeout, an overloaded object, an open breaker or a key's backoff). Admissions count at decision time. " +
      "*Calls by kind* (`detail.callsByKind`, and `detail.objectPeakByKind` for the busiest second): an isolate's first sync for the key, a sync for a request its lease could not pay for, a background sync (`syncDue`), a release of an idle key's ended lease or of an evicted key's; through relays these are the isolates' syncs, and the key's object's calls are the batches. " +
      "*Relays* (`detail.relay`): the busiest relay's calls in its busiest second after the warm-up, every relay's calls, the mean syncs per batch, the syncs and batches that failed, and the relays' restarts.",
    "",
  ];
}

function strictSections(ceiling: ScenarioResult[], rtt: ScenarioResult[], limited: ScenarioResult[], charts: ChartSpec[]): string[] {
  const out: string[] = [];
  if (ceiling.length) {
    const rows = ceilings(ceiling, (r) => String(r.isolates));
    out.push(
      "## Strict hot key: its ceiling",
      "",
      "One strict key whose limit is never reached, so every request needs its object; offered load rises. Requests are coalesced as src/strict/coalescer.ts does: one call in flight per key per isolate, the requests that arrive meanwhile go together in the next (at most 128).",
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

function prototypeSection(proto: ScenarioResult[], all: ScenarioResult[]): string[] {
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
    /** The same scenario with relays that forward, as src/ has them: location relays for `proto-pool-`, continental for `proto-cpool-`. */
    const forwarding = (p: ScenarioResult) => all.find((r) => r.name === p.name.replace(/^proto-pool-/, "relay-").replace(/^proto-cpool-/, "continent-"));
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
      `bench/simulation/pool-relay.ts: each location's relay (\`proto-pool-\`) or continent's (\`proto-cpool-\`) is one peer of the key's object and syncs with it as an isolate does (floodgate's \`nextSync\`, \`applyLease\`, \`syncDue\` on its own \`LocalKey\`), at the times the object books for it; it answers its isolates' syncs from the units it holds, carving each a sub-lease out of one of its lots, sized and timed as the key's object leases an isolate (its demand read by floodgate's \`demandRate\` until its next call an interval on has had half an interval to be answered, with a standard deviation more, topping up what it holds; lasting until then or, for a quiet isolate, ${QUIET_GAPS} of its mean gaps, up to ${QUIET_UNTIL_INTERVALS} intervals), never past a lot it holds units of, and reports upward, against that lot, what they report spent. So that a sub-lease can last as long as an isolate's lease, the key's object makes a pooled relay's lease and pins last ${POOL_LEASE_MS / 1000} s at least (\`lastLonger\` in bench/simulation/object.ts, not in src/): with the relay's lots ending at its booked call, sub-leases lasted about a second and 38–41 % of requests at 1× waited. An isolate whose requests the relay cannot pay waits for the relay's own sync, and one it turns away with nothing, its key at its limit, is booked for when that sync is due back. The key's object then has the relays, not the isolates, for peers. The same scenarios at 512 isolates as \`aggregate: "location"\` and \`aggregate: "continent"\` (forwarding → pooled):`,
      "",
      table(["scenario", "max window ÷ limit or token excess", "calls/s peak", "under-admission", "waited", "wait p50 / p99"], rows),
      "",
      summary,
      "",
    );
  }
  return out;
}

/** A run's relay figures: set on every run whose rule aggregates. */
const relaysOf = (r: ScenarioResult) => r.detail.relay!;

/** The relay runs' columns beside the scenario table's. */
const RELAY_COLUMNS: Extra = {
  headers: ["relay calls/s peak", "relay calls", "syncs per batch", "busiest relay busy"],
  cells: (r) => [n(relaysOf(r).callsPerSecondPeak), n(relaysOf(r).calls), relaysOf(r).syncsPerBatch.toFixed(2), percent(relaysOf(r).busy)],
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
function relaySection(rows: ScenarioResult[], all: ScenarioResult[], charts: ChartSpec[]): string[] {
  // A scenario in MANY_LOCATIONS is set beside the same relays in LOCATIONS.
  const pairs = rows.map((r) => ({ r, d: all.find((x) => (inManyLocations(r.name) ? `${x.name}-l${MANY_LOCATIONS}` === r.name : relayOf(x.name) === r.name && x.family !== "relay")) }));
  return [
    "## Relays: `aggregate: \"location\"`",
    "",
    `The global keys at 512 and 4,096 isolates, and the churn stress's sliding window, again with the rule's \`aggregate: "location"\` (src/fast/relay.ts, src/durable-object/relay.ts), the alternative to \`aggregate: "continent"\` ([below](#continental-relays-aggregate-continent)): each isolate syncs through its location's relay, which sends the syncs waiting there to the key's object as one \`syncAll\`, one batch in flight, at most ${RELAY_BATCH} syncs each, and refuses a sync at once when ${n(RELAY_QUEUE)} wait. ` +
      `Batches leave a relay at least its gap apart: ${RELAY_GAP_MS} ms (\`RELAY_GAP_MS\`) until the key's object answers one, then what the object asks for, its share of ${RELAY_CALLS_PER_SECOND} calls a second among the relays it heard from in the last ${RELAY_ACTIVE_MS / 1000} s, at most ${MAX_RELAY_GAP_MS} ms (\`relayGap\`, \`RelayBook\`). ` +
      `The isolates sit in ${LOCATIONS} locations, so the key's object hears from at most ${LOCATIONS} relays, each at most once per ${relayGap(LOCATIONS)} ms once paced: ${n((LOCATIONS * 1000) / relayGap(LOCATIONS))} calls a second at most. ` +
      `The \`-l${MANY_LOCATIONS}\` scenarios repeat those at 4,096 isolates in ${MANY_LOCATIONS} locations (about Cloudflare's count), where each relay hears fewer syncs and the object's pace allows up to ${n((MANY_LOCATIONS * 1000) / relayGap(MANY_LOCATIONS))} calls a second. ` +
      "*calls/s peak* and *calls per 100* count the key's object's calls (the batches); *waited* counts requests that waited on a sync through their relay; *relay calls/s peak* is the busiest relay's busiest second after the warm-up, *relay calls* all the isolates' calls to their relays, *syncs per batch* their mean over the batches. " +
      `A relay sends a sync at once when it has sent nothing for its gap, and no relay here took more than ${n(Math.max(...rows.map((r) => relaysOf(r).callsPerSecondPeak)))} calls in a second after the warm-up, so few syncs met in a batch: ${span(rows, (r) => relaysOf(r).syncsPerBatch, (x) => x.toFixed(2))} a batch on average. ` +
      `Over these runs ${relayTrouble(rows)}`,
    "",
    scenarioTable(rows, RELAY_COLUMNS),
    "",
    `Each beside the same scenario without relays (default → \`aggregate: "location"\`), and each \`-l${MANY_LOCATIONS}\` beside the same relays in ${LOCATIONS} locations (${LOCATIONS} → ${MANY_LOCATIONS}):`,
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

/** The continent family: its own table with the relays' figures, and each scenario beside the default design's and the location relays'. */
function continentSection(rows: ScenarioResult[], all: ScenarioResult[]): string[] {
  const relays = CONTINENTS.length;
  const named = (name: string) => all.find((x) => x.name === name);
  // A continent scenario's location relays are its name with `relay-` for `continent-`; the repeat in MANY_LOCATIONS first, where the continent scenarios run.
  const runs = rows.map((r) => {
    const location = r.name.replace(/^continent-/, "relay-");
    return { r, d: all.find((x) => continentOf(x.name) === r.name && x.family !== "continent"), l: named(`${location}-l${MANY_LOCATIONS}`) ?? named(location) };
  });
  const locations = runs.flatMap(({ l }) => (l ? [l] : []));
  const defaults = runs.flatMap(({ d }) => (d ? [d] : []));
  const batch = (r: ScenarioResult) => relaysOf(r).syncsPerBatch;
  const calls = (r: ScenarioResult) => r.objectCallsPerSecondPeak;
  const most = (f: (r: ScenarioResult) => number) => [...rows].sort((a, b) => f(b) - f(a))[0]!;
  const busiest = most((r) => relaysOf(r).callsPerSecondPeak);
  const coldest = most((r) => relaysOf(r).callsPerSecondPeakWithWarmup);
  const failing = rows.filter((r) => r.errors > 0);
  const whyFailed = (r: ScenarioResult) =>
    Object.entries(r.detail.errorsByKind)
      .filter(([, v]) => v > 0)
      .map(([kind, v]) => `${kind} ${n(v)}`)
      .join(", ");
  const inLocations = (many: boolean) => locations.filter((l) => inManyLocations(l.name) === many);
  const against = [
    defaults.length && `${span(defaults, calls, n)} in the default design`,
    inLocations(false).length && `${span(inLocations(false), calls, n)} through location relays in ${LOCATIONS} locations`,
    inLocations(true).length && `${span(inLocations(true), calls, n)} in ${MANY_LOCATIONS}`,
  ].filter(Boolean);
  return [
    "## Continental relays: `aggregate: \"continent\"`",
    "",
    `The same scenarios again with the rule's \`aggregate: "continent"\`, the design the README recommends at 512 and 4,096 isolates: each isolate syncs through its continent's relay (\`request.cf.continent\`), the same relay code as \`aggregate: "location"\`, its isolates in ${MANY_LOCATIONS} locations over ${relays} continents. ` +
      `It cuts the key's object's calls twice over. The key's object hears from at most ${relays} relays, so it paces each at the shortest gap, ${relayGap(relays)} ms: ${n((relays * 1000) / relayGap(relays))} calls a second at most, however many locations there are. ` +
      `Location relays in ${MANY_LOCATIONS} locations would each need a gap of ${n(Math.ceil((MANY_LOCATIONS * 1000) / RELAY_CALLS_PER_SECOND))} ms to keep within ${RELAY_CALLS_PER_SECOND} calls a second, but the gap stops at ${MAX_RELAY_GAP_MS} ms (\`MAX_RELAY_GAP_MS\`, so a sync is still answered in time), which lets them send up to ${n((MANY_LOCATIONS * 1000) / relayGap(MANY_LOCATIONS))} a second; ${relays} relays never reach that cap. ` +
      `And each relay hears a whole continent's syncs, so more of them meet in a batch: ${span(rows, batch, (x) => x.toFixed(2))} a batch on average${locations.length ? `, against ${span(locations, batch, (x) => x.toFixed(2))} through the location relays beside them` : ""}. ` +
      "The relay columns read as for the location relays: the busiest relay's busiest second after the warm-up, the isolates' calls to their relays, the mean syncs a batch, the busiest relay's busy share of its thread.",
    "",
    scenarioTable(rows, RELAY_COLUMNS),
    "",
    `Each beside the same scenario of the default design and through location relays (default → \`aggregate: "location"\` → \`aggregate: "continent"\`); the location relays' run is the \`-l${MANY_LOCATIONS}\` repeat where one ran, in the same ${MANY_LOCATIONS} locations as the continent scenarios, otherwise the run in ${LOCATIONS} (*location relays in*):`,
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
    `Through continental relays the key's object took ${span(rows, calls, n)} calls in its busiest second${against.length ? `, against ${against.join(" and ")}` : ""}.`,
    "",
    `**The limitation: one relay per continent takes every sync of that continent's isolates for the key.** The busiest continental relay here took ${n(relaysOf(busiest).callsPerSecondPeak)} calls in its busiest second after the warm-up (\`${busiest.name}\`, busy ${percent(relaysOf(busiest).busy)} of its thread), ` +
      `and ${n(relaysOf(coldest).callsPerSecondPeakWithWarmup)} counting the warm-up, when every isolate makes its first sync (\`${coldest.name}\`)${locations.length ? `; no location relay beside them took more than ${n(Math.max(...locations.map((l) => relaysOf(l).callsPerSecondPeakWithWarmup)))}, warm-up included` : ""}. ` +
      `A relay is an object too, at ${SERVICE.baseMs} ms an isolate's call about ${n(1000 / SERVICE.baseMs)} calls a second (Cloudflare's soft limit per object): a key whose one continent sends it more syncs a second than that makes its continent's relay the hot object, queueing, then refusing syncs (at ${n(RELAY_QUEUE)} waiting) or answering "overloaded", where location relays spread the same syncs over the continent's locations. ` +
      `${failing.length ? `Requests that got onError's answer through continental relays: ${failing.map((r) => `\`${r.name}\` ${n(r.errors)} (${whyFailed(r)})`).join(", ")}.` : "No request through a continental relay got onError's answer."} ` +
      `Over these runs ${relayTrouble(rows)}`,
    "",
  ];
}

/** What the runs show beyond the targets, each from its scenario's own numbers (left out when that scenario did not run). */
function findings(results: ScenarioResult[]): string[] {
  const by = (name: string) => results.find((r) => r.name === name);
  const items: string[] = [];
  const sampled = results.filter((r) => r.family !== "prototype" && r.detail.objectMaxPeerRowBytes > 0);
  const most = [...sampled].sort((a, b) => b.detail.objectMaxPeers - a.detail.objectMaxPeers)[0];
  const largest = [...sampled].sort((a, b) => b.detail.objectMaxPeerRowBytes - a.detail.objectMaxPeerRowBytes)[0];
  if (most && largest) {
    const keyRow = Math.max(...sampled.map((r) => r.detail.objectMaxKeyRowBytes));
    items.push(
      `**No row nears SQLite's limit: rows are per peer.** The object writes one row per peer and one for the key's state (src/durable-object/rate-limiter.ts \`writePeers\`, \`write\`). ` +
        `The largest peer row sampled in any run was ${n(largest.detail.objectMaxPeerRowBytes)} bytes (\`${largest.name}\`), the largest key row ${n(keyRow)} bytes; \`${most.name}\` held the most peers, ${n(most.detail.objectMaxPeers)}. ` +
        "A SQLite-backed object's row is capped at 2 MB (Durable Objects *Limits*), which the number of isolates no longer approaches, and a sync's work does not grow with them either (src/fast/peer-index.ts); an alarm's walk of them does, once a minute.",
    );
  }
  const sw = by("fast-sw-global-i64-10x");
  if (sw && sw.detail.callsPerSecond.length > 10) {
    const series = sw.detail.callsPerSecond.slice(10, -1);
    const sorted = [...series].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
    const at = 10 + series.indexOf(Math.max(...series));
    items.push(
      `**Calls per second, median and busiest.** \`${sw.name}\`: after the warm-up a median second brought its object ${n(median)} calls and the busiest ${n(sw.objectCallsPerSecondPeak)} ` +
        `(second ${at} of the run; the window turns every ${sw.detail.periodMs / 1000} s from second 0): ${callKinds(sw.detail.objectPeakByKind)}.`,
    );
  }
  const over = [...results].filter((r) => r.family === "global-fast" && r.detail.admittedOnError > 0).sort((a, b) => b.detail.admittedOnError - a.detail.admittedOnError)[0];
  if (over) {
    items.push(
      `**onError "local" admits beside the leases.** \`${over.name}\`: with the object busy ${percent(over.detail.objectBusy)}, ${n(over.errors)} requests got onError's answer and ${n(over.detail.admittedOnError)} were admitted by onError's own counters, ` +
        `beside the ${n(over.detail.admitted - over.detail.admittedOnError)} the leases admitted (${over.maxPerWindowOverLimit !== null ? `${f3(over.maxPerWindowOverLimit)} × the limit in one window` : `token excess ${f3(over.tokenExcess)}`}). ` +
        "The object counts them when the isolate next syncs, so later leases are smaller; it cannot refuse them.",
    );
  } else if (results.some((r) => r.family === "global-fast")) {
    items.push("**onError admitted nothing on the global keys.** No global fast run had a request admitted by onError: every admission was a lease's.");
  }
  const client = results.find((r) => r.family === "per-client");
  if (client) {
    items.push(
      `**Per-client keys.** \`${client.name}\`: ${client.objectCallsPer100Requests.toFixed(0)} calls per 100 requests and ${percent(client.waitedForObject)} of requests waiting; its ${n(client.detail.calls)} calls: ${callKinds(client.detail.callsByKind)}. ` +
        "Strict mode costs at most one call a request, fewer when coalesced or denied from the cache.",
    );
  }
  const shown = ["fast-sw-global-i512-1x", "fast-sw-global-i4096-10x", "fast-tb-global-i512-1x", "fast-tb-global-i4096-10x", "fast-sw-300per30s-i8-10x", "fast-tb-300per30s-i8-10x", "churn-sw-global-i512-1x"]
    .map(by)
    .filter((r): r is ScenarioResult => r !== undefined);
  const kinds = shown.length
    ? [
        "Where fast calls come from (whole run; the busiest second after the warm-up in brackets):",
        "",
        table(
          ["scenario", "calls", "first", "waiting", "background", "release", "busiest second"],
          shown.map((r) => {
            const k = r.detail.callsByKind;
            const p = r.detail.objectPeakByKind;
            return [`\`${r.name}\``, n(r.detail.calls), `${n(k.first)} (${n(p.first)})`, `${n(k.waiting)} (${n(p.waiting)})`, `${n(k.background)} (${n(p.background)})`, `${n(k.release)} (${n(p.release)})`, n(r.objectCallsPerSecondPeak)];
          }),
          ["l", "r", "r", "r", "r", "r", "r"],
        ),
        "",
      ]
    : [];
  const waits = whyWaited(results);
  return items.length || kinds.length || waits.length ? ["## What else the runs show", "", ...items.flatMap((i) => [`- ${i}`]), "", ...kinds, ...waits] : [];
}

/** Column headings of the wait causes (see WaitCause, bench/simulation/isolate.ts). */
const CAUSE_HEADINGS: Record<WaitCause, string> = {
  first: "first call",
  expired: "lease ended",
  behindTopUp: "behind a top-up",
  behindBookedCall: "behind the booked call",
  behindWait: "behind a wait",
  behindRelease: "behind a release",
  spentBeforeBooked: "spent, none on its way",
  spentAfterBooked: "spent, booked call not made",
};

/** Why the requests of the global keys at 1× waited, as shares of all requests after the warm-up: what the waits target is made of. */
function whyWaited(results: ScenarioResult[]): string[] {
  const rows = results.filter((r) => r.detail.waitsByCause && r.isolates >= 512 && r.name.includes("-global-") && r.name.endsWith("-1x"));
  if (rows.length === 0) return [];
  const share = (r: ScenarioResult, c: WaitCause) => percent(r.detail.waitsByCause![c] / Math.max(1, r.detail.steadyRequests));
  return [
    "Why requests waited at 1×, each cause as a share of all requests after the warm-up (bench/simulation/isolate.ts `WaitCause`): the isolate's *first call* for the key; units in a *lease* that had *ended*; the lease spent while a call was on its way (*behind a top-up* started early, *the booked call*, a call *a wait* started, *a release*); or spent with no call on its way, before the booked time (*none on its way*: no early top-up started) or after it (*booked call not made*: left to a request).",
    "",
    table(["scenario", "waited", ...WAIT_CAUSES.map((c) => CAUSE_HEADINGS[c])], rows.map((r) => [`\`${r.name}\``, percent(r.waitedForObject), ...WAIT_CAUSES.map((c) => share(r, c))]), ["l", "r", ...WAIT_CAUSES.map(() => "r" as const)]),
    "",
  ];
}
