/** Runs one scenario: builds the rule with floodgate's own config parser, the isolates, the objects and the traffic, and drives the clock. */
import type { Policy } from "../../src/algorithms";
import { parseConfig } from "../../src/config/rules";
import type { Rule } from "../../src/config/types";
import { policyOf } from "../../src/config/policy";
import { mix32, Random } from "../lib/random";
import { Clock, hash32 } from "./clock";
import { ColoIsolate } from "./colo-isolate";
import { FastIsolate } from "./fast-isolate";
import type { IsolateBase, Link } from "./isolate";
import { drawRtt, legMs } from "./latency";
import { KeyAccount, RunTotals } from "./metrics";
import { KeyObject } from "./object";
import type { Scenario } from "./scenarios";
import { StrictIsolate } from "./strict-isolate";
import { Arrivals, homeOf, Zipf } from "./traffic";
import { summarise, type ScenarioResult } from "./summary";

/** An epoch-aligned start (a whole number of minutes), so fixed windows are the algorithms' own. */
export const T0 = 1_700_000_040_000;
/** After the traffic stops, the clock runs on this long so that every waiting request ends. */
const DRAIN_MS = 5_000;

/** The rule as floodgate's parser builds it from the scenario: every default (sync, timeout unless the scenario sets one, buckets) is the product's. */
export function ruleOf(s: Scenario): Rule {
  const timeout = s.timeoutMs === undefined ? {} : { timeout: `${s.timeoutMs}ms` };
  return parseConfig([{ name: "sim", key: s.keys > 1 ? "header:x-client" : "global", algorithm: s.algorithm, limit: s.limit, period: `${s.periodMs}ms`, mode: s.mode, ...timeout }]).rules[0]!;
}

/** Everything one run keeps while it runs. */
export interface World {
  scenario: Scenario;
  rule: Rule;
  policy: Policy;
  clock: Clock;
  objects: Map<string, KeyObject>;
  accounts: Map<string, KeyAccount>;
  totals: RunTotals;
  slots: IsolateBase[];
  /** isolates that have lived, vanished ones included */
  born: number;
}

export function runScenario(s: Scenario, seed: number): ScenarioResult {
  const stream = (k: number) => new Random(mix32(seed ^ hash32(s.name), k));
  const rtts = stream(1);
  const jitter = stream(2);
  const lifetimes = stream(3);
  const picks = stream(4);
  const arrivalsRandom = stream(5);
  const rule = ruleOf(s);
  const policy = policyOf(rule);
  const clock = new Clock(T0);
  const totals = new RunTotals(T0, s.warmupMs);
  const world: World = { scenario: s, rule, policy, clock, objects: new Map(), accounts: new Map(), totals, slots: [], born: 0 };

  const objectFor = (name: string): KeyObject => {
    let object = world.objects.get(name);
    if (!object) {
      const options = { rowSampleMs: s.keys === 1 ? 5_000 : 0, steadyFrom: T0 + s.warmupMs, dropExpired: s.dropExpired };
      world.objects.set(name, (object = new KeyObject(clock, policy, options)));
    }
    return object;
  };
  const link: Link = {
    clock,
    call(from, objectName, payload, onReply) {
      totals.call(clock.now);
      const deadline = clock.now + rule.timeoutMs;
      clock.after(legMs(from.rttMs, jitter), () =>
        objectFor(objectName).receive({
          ...payload,
          deadline,
          reply: (reply) =>
            clock.after(legMs(from.rttMs, jitter), () => {
              if (from.alive) onReply(reply);
            }),
        }),
      );
    },
  };

  // PROTOTYPE: each location's aggregator is a fast isolate that never vanishes, at the location's distance; its isolates are near it.
  const aggregators = Array.from({ length: s.locations }, (_, k) => new FastIsolate(`colo-${k}`, drawRtt(s.rtt, rtts), link, totals));
  // Isolates: one per slot; a slot's isolate vanishes after an exponential lifetime and a fresh one takes its place, at the same distance.
  const spawn = (slot: number, rttMs: number): void => {
    const id = `iso-${slot}-${world.born++}`;
    const isolate = aggregators.length > 0 ? new ColoIsolate(id, link, aggregators[slot % aggregators.length]!) : s.mode === "fast" ? new FastIsolate(id, rttMs, link, totals) : new StrictIsolate(id, rttMs, link, s.coalesce);
    world.slots[slot] = isolate;
    if (Number.isFinite(s.lifetimeMs)) {
      clock.after(lifetimes.exponential(s.lifetimeMs), () => {
        isolate.vanish();
        spawn(slot, rttMs);
      });
    }
  };
  for (let slot = 0; slot < s.isolates; slot++) spawn(slot, aggregators.length > 0 ? 0 : drawRtt(s.rtt, rtts));

  const spread = new Zipf(s.isolates, s.spread === "skewed" ? 1 : 0);
  const keys = s.keys > 1 ? new Zipf(s.keys, s.zipf) : null;
  const end = T0 + s.durationMs;
  const arrivals = new Arrivals(s.shape, T0, arrivalsRandom);
  const traffic = {
    next: arrivals.after(T0),
    arrive() {
      const now = clock.now;
      const key = keys ? keys.pick(picks) : 0;
      const slot = keys ? homeOf(key, s.isolates, s.homes, picks) : spread.pick(picks);
      const name = `sim/${key}`;
      let account = world.accounts.get(name);
      if (!account) world.accounts.set(name, (account = new KeyAccount(policy, T0, s.keys === 1)));
      const counted = account;
      counted.arrived(now, 1);
      totals.offered(now);
      world.slots[slot]!.request(rule, name, 1, (outcome) => {
        totals.ended(outcome, now, clock.now);
        if (outcome.decision?.allowed) counted.admit(clock.now, 1);
      });
      const next = arrivals.after(now);
      traffic.next = next < end ? next : Infinity;
    },
  };
  clock.run(end + DRAIN_MS, traffic);
  return summarise(world);
}
