/** The simulation report's model section, and the idealized lease bounds set beside the 1× targets. */
import { percent, table } from "../../lib/stats";
import { CONTINENT_RTT, continentAt, CONTINENTS, JITTER, MIXED_RTT, RELAY_RTT } from "../latency";
import { longestCycle, reorderBound } from "../bound";
import { OVERLOAD, SERVICE } from "../object";
import { AUTO_RELAY_PEERS } from "../../../src/fast/relay";
import { MAX_CALLS_PER_SECOND } from "../../../src/fast/schedule";
import { FULL, LIFETIME_MS, LOCATIONS, MANY_LOCATIONS, QUICK, STRESS_LIFETIME_MS } from "../scenarios";
import type { ScenarioResult } from "../summary";
import { n } from "./format";

/** Both 1× targets beside two idealized bounds (./bound.ts): a lease refilled on a fixed cycle, and one refilled at a reorder point. */
export function boundSection(global: ScenarioResult[]): string[] {
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
    `Two bounds, not measurements (bench/simulation/bound.ts), each set beside the sliding window at 1× as run with \`aggregate: "none"\` (every isolate straight to the key's object). ` +
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

/** How many of the default's scenarios' MANY_LOCATIONS locations are on continent `code`. */
function continentLocations(code: string): number {
  return Array.from({ length: MANY_LOCATIONS }, (_, k) => continentAt(k, MANY_LOCATIONS)).filter((c) => c === code).length;
}

export function modelSection(): string[] {
  return [
    "## The model",
    "",
    "**What runs is floodgate's.** Each rule is built by floodgate's config parser (`parseConfig`), so sync interval, timeout, buckets and onError are the product's defaults. " +
      "Each isolate keeps real `LocalKey`s and calls `freshKey`, `decideLocally`, `fromLease`, `nextSync`, `applyLease`, `syncFailed`, `admittedUnleased` and `surrender` (src/fast/local.ts), `syncDue` (src/fast/sync-timing.ts) on floodgate's own `LruTable`; " +
      "a rule with `aggregate: \"location\"` or `\"continent\"`, or `\"auto\"` once its key is crowded (`crowded`, in `applyLease`), names its location's or its continent's relay with `syncsThrough` and `relayFor`, and each relay queues and batches with floodgate's own `RelayQueue` (src/fast/relay.ts); " +
      "each key's object calls `grantLease` (src/fast/lease.ts), `leasePolicy`, `settlePins`, `putPeer`, `removePeer` on its peer index (src/fast/peer-index.ts), `isLive`, `lastPinEnds` (src/fast/peer.ts) and the algorithms' `decide`, `peek`, `carryOver`; strict isolates use floodgate's `DenialCache`, `Breakers`, `RuleBreaker` and `LastAnswers` (src/strict/last-answers.ts, where onError's `local` starts a strict key), and batch with its `Lanes` (src/strict/lanes.ts). " +
      "What cannot be imported is mirrored in a few lines, each naming the lines it mirrors: the object's `sync`, `syncAll`, `decide` and `alarm` bodies (src/durable-object/rate-limiter.ts extends `DurableObject` from `cloudflare:workers`, which Node cannot load), the relay's `forward`, `pump` and `send` (src/durable-object/relay.ts, on timers and promises), " +
      "the promise-and-`Date.now()` shells of src/fast/index.ts (`decideFast`, `sync`, `sweep`, `flushEvicted`) and of src/strict/coalescer.ts and index.ts, and onError's `local` answer (its table is module state, one per isolate). Time is a parameter of every floodgate function, so the simulated clock drives them directly.",
    "",
    "**Round trips.** Each isolate draws its round trip to the key's object once, from this mixture (where a relay may carry its syncs, each location's is drawn instead, see below); each leg of each call is half of it times a uniform factor in " +
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
    `**Continental relays** (\`aggregate: "auto"\`, the default, once the key's object reports ${AUTO_RELAY_PEERS} peers; \`"continent"\` from the first sync). The default's scenarios (\`auto-\`) run their isolates in ${MANY_LOCATIONS} locations (slot *k* at location *k* mod ${MANY_LOCATIONS}), spread over the continents (\`request.cf.continent\`) by share of the locations, an assumption (roughly where Cloudflare's cities are): ` +
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
