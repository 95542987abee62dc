/** The scenarios: every family the issue asks for, at full and quick sizes, each named so `--only` can pick it. */
import type { AlgorithmName } from "../../src/algorithms";
import type { RttModel } from "./latency";
import { OptionError, type Options } from "./options";
import type { Shape } from "./traffic";

export type Family = "global-fast" | "calls-at-8" | "agreement" | "churn" | "relay" | "auto" | "per-client" | "strict-ceiling" | "strict-rtt" | "strict-limited" | "prototype";

export interface Scenario {
  name: string;
  family: Family;
  mode: "fast" | "strict";
  algorithm: AlgorithmName;
  isolates: number;
  /** offered load as a multiple of the limit's rate (for per-client keys: of the hottest key) */
  load: number;
  limit: number;
  periodMs: number;
  shape: Shape;
  /** how requests spread over isolates: evenly, or by Zipf's law (s = 1) */
  spread: "uniform" | "skewed";
  /** how many keys; above 1, drawn by Zipf's law with exponent `zipf`, each key's traffic on `homes` isolates */
  keys: number;
  zipf: number;
  homes: number;
  durationMs: number;
  /** requests arriving before this are left out of the steady-state figures (waitedForObject) */
  warmupMs: number;
  /** mean isolate lifetime (exponential); Infinity: isolates never vanish */
  lifetimeMs: number;
  rtt: RttModel;
  /** strict: coalesce concurrent requests per key per isolate (src/strict/coalescer.ts) */
  coalesce: boolean;
  /** PROTOTYPE: the object answers at once, undone, a call whose caller has already given up */
  dropExpired: boolean;
  /** the rule's `aggregate`: isolates sync straight to the key's object, through their location's or continent's relay, or (auto) straight until the object reports a crowd */
  aggregate: "none" | "auto" | "location" | "continent";
  /**
   * PROTOTYPE: each relay (of a location or a continent, by `aggregate`) holds a lease for its
   * isolates and answers them from it (bench/simulation/pool-relay.ts); absent: relays forward
   * syncs, as src/ has them
   */
  pooled?: true;
  /** the rule's timeout; absent: the product's default */
  timeoutMs?: number;
  /** locations the isolates sit in, one relay each where the rule aggregates; absent: LOCATIONS */
  locations?: number;
}

export const ISOLATE_COUNTS = [8, 64, 512, 4096] as const;

/** Minutes an isolate lives on average in every scenario but the churn stress (an assumption: see SIMULATION.md). */
export const LIFETIME_MS = 5 * 60_000;
/** The churn stress: isolates vanish every 30 s on average, with whatever they hold. */
export const STRESS_LIFETIME_MS = 30_000;

/** Locations a key's isolates sit in, slot k at location k mod 64 (an assumption: Cloudflare has about 300; a key's traffic reaches fewer): where the rule aggregates, one relay each. */
export const LOCATIONS = 64;

/**
 * The relay scenarios at 4,096 isolates again with the isolates in this many locations (Cloudflare's
 * count, about 300): how far the calls at the key's object lean on the 64 assumed.
 */
export const MANY_LOCATIONS = 300;

/** The scenario that repeats one of `aggregate: "none"` with the default, `aggregate: "auto"`: `auto-…` for `fast-…`, `auto-churn-…` for `churn-…`. */
export function autoOf(scenario: string): string {
  return scenario.replace(/^fast-/, "auto-").replace(/^churn-/, "auto-churn-");
}

/** Whether a scenario is one of the cost runs at 8 isolates (`calls-at-8`), or the default's repeat of one. */
export function isCostRun(name: string): boolean {
  return /-\d+per\d+s-i8-10x$/.test(name);
}

/** Whether a scenario is one of the MANY_LOCATIONS repeats (`…-l300`). */
export function inManyLocations(name: string): boolean {
  return name.endsWith(`-l${MANY_LOCATIONS}`);
}

/** The relay scenario that repeats a scenario of the default design with `aggregate: "location"`: `relay-…` for `fast-…`, `relay-churn-…` for `churn-…`. */
export function relayOf(scenario: string): string {
  return scenario.replace(/^fast-/, "relay-").replace(/^churn-/, "relay-churn-");
}

/** Durations and rates; quick runs shorten the runs and drop some variants, not the sizes the targets are read at. */
export interface Sizes {
  /** the global key's limit per 60 s */
  globalLimit: number;
  /** simulated time of a fast run below 2,048 isolates, and at or above it (shorter: those runs take most of the run time) */
  fastMs: number;
  fastLargeMs: number;
  churnMs: number;
  /**
   * what the steady-state figures of a global fast key leave out: its first period, while a window
   * that started empty fills (waits and refusals come once it is full, and stay)
   */
  fastWarmupMs: number;
  strictMs: number;
  perClientMs: number;
  strictOffered: number[];
  /** the strict hot key by round trip: offered loads coalesced, and alone (one call a request, whose ceiling is the object's 1,000 calls a second) */
  rttOffered: number[];
  rttAloneOffered: number[];
  /** the global-fast variants run below 512 isolates, and at or above it (where every run is long: the object's code is O(peers) a sync) */
  variants: readonly Variant[];
  largeVariants: readonly Variant[];
}

type Variant = "1x" | "10x" | "10x-skewed" | "flash";

export const FULL: Sizes = {
  globalLimit: 30_000,
  fastMs: 240_000,
  fastLargeMs: 150_000,
  churnMs: 240_000,
  fastWarmupMs: 60_000,
  strictMs: 10_000,
  perClientMs: 80_000,
  strictOffered: [500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000],
  rttOffered: [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000],
  rttAloneOffered: [1_000, 2_000, 4_000, 8_000],
  variants: ["1x", "10x", "10x-skewed", "flash"],
  largeVariants: ["1x", "10x", "flash"],
};

export const QUICK: Sizes = {
  globalLimit: 30_000,
  fastMs: 40_000,
  fastLargeMs: 20_000,
  churnMs: 40_000,
  fastWarmupMs: 10_000,
  strictMs: 4_000,
  perClientMs: 40_000,
  strictOffered: [1_000, 4_000, 16_000],
  rttOffered: [1_000, 16_000],
  rttAloneOffered: [1_000, 16_000],
  variants: ["1x", "10x"],
  largeVariants: ["1x", "10x"],
};

const base = {
  shape: { kind: "steady", perSecond: 0 } as Shape,
  spread: "uniform" as const,
  keys: 1,
  zipf: 0,
  homes: 1,
  warmupMs: 10_000,
  lifetimeMs: LIFETIME_MS,
  rtt: "mixed" as RttModel,
  coalesce: true,
  dropExpired: false,
  aggregate: "none" as const,
};

/**
 * The scenario test/harness/scale-agreement.test.ts also runs in workerd, sized for 2 cores: one
 * global fast sliding window (default sync and buckets), 32 isolates each 50 ms from the object,
 * 10× its limit spread evenly, no isolate churn. Its timeout is 5 s, not 1 s: a 2-core machine
 * running other tests stalls workerd for a second or two, and a request that gave up on its sync
 * would be admitted by onError, which at 50 ms never happens and so is not what is compared.
 * The test holds workerd's bound within `boundTolerance` of the limit of the simulation's, and its
 * object calls (a second, and per 100 requests) within a factor of `callRateFactor` of them; it
 * says why those figures.
 */
export const AGREEMENT = {
  name: "agreement-sw-global-i32-rtt50-10x",
  isolates: 32,
  rttMs: 50,
  limit: 200,
  periodMs: 10_000,
  load: 10,
  durationMs: 30_000,
  warmupMs: 10_000,
  timeoutMs: 5_000,
  boundTolerance: 0.05,
  callRateFactor: 1.15,
} as const;

const short = (a: AlgorithmName) => (a === "sliding-window" ? "sw" : "tb");
const steady = (limit: number, periodMs: number, load: number): Shape => ({ kind: "steady", perSecond: (load * limit * 1000) / periodMs });

/** Every scenario of a full or quick run, in report order; `counts` replaces 8, 64, 512 and 4,096 where a family sweeps them. */
export function scenarios(sizes: Sizes, counts: readonly number[] = ISOLATE_COUNTS): Scenario[] {
  const out: Scenario[] = [];
  const algorithms: AlgorithmName[] = ["sliding-window", "token-bucket"];
  const L = sizes.globalLimit;
  const P = 60_000;
  const fastMs = (isolates: number) => (isolates >= 2_048 ? sizes.fastLargeMs : sizes.fastMs);
  const warmupMs = sizes.fastWarmupMs;
  // A flash crowd: the limit's rate, then, a sixth of the way past the warm-up, within 5 s ten times it, held a third of the run, then back.
  const flash = (durationMs: number): Shape => ({ kind: "flash", ...flashTiming(durationMs, warmupMs), basePerSecond: (L * 1000) / P, peakPerSecond: (10 * L * 1000) / P, rampMs: 5_000 });
  for (const algorithm of algorithms) {
    for (const isolates of counts) {
      const durationMs = fastMs(isolates);
      const one = { ...base, family: "global-fast" as const, mode: "fast" as const, algorithm, isolates, limit: L, periodMs: P, durationMs, warmupMs };
      const id = `fast-${short(algorithm)}-global-i${isolates}`;
      for (const variant of isolates >= 512 ? sizes.largeVariants : sizes.variants) {
        if (variant === "1x") out.push({ ...one, name: `${id}-1x`, load: 1, shape: steady(L, P, 1) });
        if (variant === "10x") out.push({ ...one, name: `${id}-10x`, load: 10, shape: steady(L, P, 10) });
        if (variant === "10x-skewed") out.push({ ...one, name: `${id}-10x-skewed`, load: 10, shape: steady(L, P, 10), spread: "skewed" });
        if (variant === "flash") out.push({ ...one, name: `${id}-flash`, load: 10, shape: flash(durationMs), spread: "skewed" });
      }
    }
  }
  for (const algorithm of algorithms) {
    for (const [limit, periodMs] of [[300, 30_000], [3_000, 60_000]] as const) {
      out.push({
        ...base,
        name: `fast-${short(algorithm)}-${limit}per${periodMs / 1000}s-i8-10x`,
        family: "calls-at-8",
        mode: "fast",
        algorithm,
        isolates: 8,
        load: 10,
        limit,
        periodMs,
        shape: steady(limit, periodMs, 10),
        durationMs: sizes.fastMs,
        warmupMs,
      });
    }
  }
  const a = AGREEMENT;
  out.push({
    ...base,
    name: a.name,
    family: "agreement",
    mode: "fast",
    algorithm: "sliding-window",
    isolates: a.isolates,
    load: a.load,
    limit: a.limit,
    periodMs: a.periodMs,
    shape: steady(a.limit, a.periodMs, a.load),
    durationMs: a.durationMs,
    warmupMs: a.warmupMs,
    lifetimeMs: Infinity,
    rtt: { fixedMs: a.rttMs },
    timeoutMs: a.timeoutMs,
  });
  for (const algorithm of algorithms) {
    for (const load of [1, 10]) {
      out.push({
        ...base,
        name: `churn-${short(algorithm)}-global-i512-${load}x`,
        family: "churn",
        mode: "fast",
        algorithm,
        isolates: 512,
        load,
        limit: L,
        periodMs: P,
        shape: steady(L, P, load),
        durationMs: sizes.churnMs,
        warmupMs,
        lifetimeMs: STRESS_LIFETIME_MS,
      });
    }
  }
  // The global keys past 64 isolates again, with `aggregate: "location"`: each location's relay forwards its isolates' syncs.
  const relayed = out.filter((r) => (r.family === "global-fast" && r.isolates >= 512) || (r.family === "churn" && r.algorithm === "sliding-window"));
  const relays = relayed.map((r) => ({ ...r, name: relayOf(r.name), family: "relay" as const, aggregate: "location" as const }));
  out.push(...relays, ...relays.filter((r) => r.isolates === 4_096).map((r) => ({ ...r, name: `${r.name}-l${MANY_LOCATIONS}`, locations: MANY_LOCATIONS })));
  // Every global key, the cost runs at 8 isolates and the churn stress again with the default,
  // `aggregate: "auto"`, the isolates in MANY_LOCATIONS: a global key's first sync through its
  // continent's relay, then straight to the key's object until it reports a crowd, then the relay.
  const autos = out.filter((r) => r.family === "global-fast" || r.family === "calls-at-8" || r.family === "churn");
  out.push(...autos.map((r) => ({ ...r, name: autoOf(r.name), family: "auto" as const, aggregate: "auto" as const, locations: MANY_LOCATIONS })));
  // Per-client keys: 600 per minute each; the hottest of 100,000 (Zipf, s = 1) at 10× its limit.
  const clientLimit = 600;
  const harmonic = Array.from({ length: 100_000 }, (_, k) => 1 / (k + 1)).reduce((a, b) => a + b, 0);
  for (const isolates of counts) {
    out.push({
      ...base,
      name: `fast-sw-per-client-i${isolates}`,
      family: "per-client",
      mode: "fast",
      algorithm: "sliding-window",
      isolates,
      load: 10,
      limit: clientLimit,
      periodMs: P,
      shape: steady(clientLimit * harmonic, P, 10),
      keys: 100_000,
      zipf: 1,
      homes: 2,
      durationMs: sizes.perClientMs,
    });
  }
  // Strict hot key within its limit (every request needs the object): rising offered load.
  const strictLimit = 60_000_000;
  const strictBase = { ...base, mode: "strict" as const, algorithm: "sliding-window" as const, limit: strictLimit, periodMs: P, durationMs: sizes.strictMs, warmupMs: 2_000 };
  for (const isolates of counts) {
    for (const offered of sizes.strictOffered) {
      const shape: Shape = { kind: "steady", perSecond: offered };
      out.push({ ...strictBase, name: `strict-hot-i${isolates}-${offered}rps`, family: "strict-ceiling", isolates, load: (offered * P) / 1000 / strictLimit, shape });
    }
  }
  for (const rtt of [10, 50, 200]) {
    for (const coalesce of [true, false]) {
      for (const offered of coalesce ? sizes.rttOffered : sizes.rttAloneOffered) {
        const shape: Shape = { kind: "steady", perSecond: offered };
        out.push({
          ...strictBase,
          name: `strict-rtt${rtt}-${coalesce ? "coalesced" : "alone"}-i8-${offered}rps`,
          family: "strict-rtt",
          isolates: 8,
          load: (offered * P) / 1000 / strictLimit,
          shape,
          rtt: { fixedMs: rtt },
          coalesce,
        });
      }
    }
  }
  // Strict at 10× a limit: what the denial cache saves.
  for (const isolates of counts) {
    out.push({ ...base, name: `strict-sw-3000per60s-i${isolates}-10x`, family: "strict-limited", mode: "strict", algorithm: "sliding-window", isolates, load: 10, limit: 3_000, periodMs: P, shape: steady(3_000, P, 10), durationMs: sizes.fastMs });
  }
  // PROTOTYPE (simulator only): relays that hold a lease for their location or continent, on the location relays' and the
  // default's global keys at 512 isolates, 1× and 10×, and the default's at 4,096 too; a continent's relay from the first
  // sync, as `aggregate: "continent"` has it.
  const steadyGlobal = (r: Scenario) => !r.name.includes("-churn-") && !r.name.endsWith("-flash") && !r.name.endsWith("-skewed");
  const pooled = out.filter((r) => steadyGlobal(r) && ((r.family === "relay" && r.isolates === 512) || (r.family === "auto" && r.isolates >= 512)));
  out.push(
    ...pooled.map((r) => ({
      ...r,
      name: r.name.replace(/^relay-/, "proto-pool-").replace(/^auto-/, "proto-cpool-"),
      family: "prototype" as const,
      pooled: true as const,
      ...(r.aggregate === "auto" ? { aggregate: "continent" as const } : {}),
    })),
  );
  // PROTOTYPE (simulator only): the strict hot key where it collapses, with calls carrying their deadline.
  for (const isolates of counts.filter((n) => n >= 512)) {
    for (const offered of sizes.strictOffered.filter((o) => o >= 1_000)) {
      const shape: Shape = { kind: "steady", perSecond: offered };
      out.push({ ...strictBase, name: `proto-deadline-strict-hot-i${isolates}-${offered}rps`, family: "prototype", isolates, load: (offered * P) / 1000 / strictLimit, shape, dropExpired: true });
    }
  }
  return out;
}

/** When a flash crowd of a run `durationMs` long comes, and how long it holds: a sixth of the way past the warm-up, a third of the run. */
function flashTiming(durationMs: number, warmupMs: number): { startMs: number; holdMs: number } {
  return { startMs: warmupMs + (durationMs - warmupMs) / 6, holdMs: durationMs / 3 };
}

/** The families, in report order. */
export const FAMILIES: readonly Family[] = ["global-fast", "calls-at-8", "agreement", "churn", "auto", "relay", "per-client", "strict-ceiling", "strict-rtt", "strict-limited", "prototype"];

/**
 * The scenarios a run's options ask for. `only` items are scenario names, family names, or globs
 * (`*` any run of characters); one that matches nothing is an error naming `--only`.
 */
export function selectScenarios(options: Pick<Options, "quick" | "isolates" | "only" | "seconds">): Scenario[] {
  let list = scenarios(options.quick ? QUICK : FULL, options.isolates ?? ISOLATE_COUNTS);
  if (options.only) {
    const tests = options.only.map((item) => {
      const pattern = new RegExp(`^${item.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
      return { item, matches: (s: Scenario) => s.family === item || pattern.test(s.name) };
    });
    for (const t of tests) {
      if (!list.some(t.matches)) throw new OptionError(`--only: "${t.item}" names no scenario of this run; give scenario names, globs such as 'fast-sw-*', or families: ${FAMILIES.join(", ")}`);
    }
    list = list.filter((s) => tests.some((t) => t.matches(s)));
  }
  if (options.seconds !== undefined) {
    const ms = options.seconds * 1000;
    list = list.map((s) => {
      const warmupMs = Math.min(s.warmupMs, ms / 4);
      return { ...s, durationMs: ms, warmupMs, shape: s.shape.kind === "flash" ? { ...s.shape, ...flashTiming(ms, warmupMs) } : s.shape };
    });
  }
  return list;
}
