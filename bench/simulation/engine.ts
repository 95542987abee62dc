/** Runs one scenario: builds the rule with floodgate's own config parser, the isolates, the objects (and relays) and the traffic, and drives the clock. */
import type { Policy } from "../../src/algorithms";
import { parseConfig } from "../../src/config/rules";
import type { Rule } from "../../src/config/types";
import { policyOf } from "../../src/config/policy";
import { mix32, Random } from "../lib/random";
import { Clock, hash32 } from "./clock";
import { FastIsolate } from "./fast-isolate";
import type { IsolateBase, Link } from "./isolate";
import { continentAt, drawRtt, legMs, placeOnContinents, RELAY_RTT } from "./latency";
import { KeyAccount, RunTotals } from "./metrics";
import { KeyObject, type Call, type Reply, type ThreadStats, type ObjectThread } from "./object";
import { POOL_LEASE_MS, PoolRelayObject, type SendSync } from "./pool-relay";
import { RelayObject, type SendBatch } from "./relay";
import { LOCATIONS, type Scenario } from "./scenarios";
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
  return parseConfig([{ name: "sim", key: s.keys > 1 ? "header:x-client" : "global", algorithm: s.algorithm, limit: s.limit, period: `${s.periodMs}ms`, mode: s.mode, ...timeout, ...(s.mode === "fast" ? { aggregate: s.aggregate } : {}) }]).rules[0]!;
}

/** Everything one run keeps while it runs. */
export interface World {
  scenario: Scenario;
  rule: Rule;
  policy: Policy;
  clock: Clock;
  objects: Map<string, KeyObject>;
  /** the locations' relays, by name (`relayName`): only where the rule aggregates */
  relays: Map<string, RelayObject | PoolRelayObject>;
  /** relays that restarted: their figures still count */
  restartedRelays: { name: string; relay: RelayObject | PoolRelayObject }[];
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
  const nearRandom = stream(6);
  const relayLives = stream(7);
  const rule = ruleOf(s);
  const policy = policyOf(rule);
  const clock = new Clock(T0);
  const totals = new RunTotals(T0, s.warmupMs);
  const world: World = { scenario: s, rule, policy, clock, objects: new Map(), relays: new Map(), restartedRelays: [], accounts: new Map(), totals, slots: [], born: 0 };

  const objectFor = (name: string): KeyObject => {
    let object = world.objects.get(name);
    if (!object) {
      const options = { rowSampleMs: s.keys === 1 ? 20_000 : 0, steadyFrom: T0 + s.warmupMs, dropExpired: s.dropExpired };
      world.objects.set(name, (object = new KeyObject(clock, policy, options, name)));
    }
    return object;
  };
  /** One call over the network: half a round trip there (jittered), the target's thread, half back; `onReply` runs back at the caller. */
  const deliver = (rttMs: number, target: () => ObjectThread<ThreadStats>, payload: Omit<Call, "reply" | "deadline">, onReply: (reply: Reply) => void): void => {
    const deadline = clock.now + rule.timeoutMs;
    clock.after(legMs(rttMs, jitter), () => target().receive({ ...payload, deadline, reply: (reply) => clock.after(legMs(rttMs, jitter), () => onReply(reply)) }));
  };

  // Where the rule aggregates, each location's round trip to the key's object is drawn once from the
  // mixture (its isolates', were they to call directly), with its round trip to its relay and the
  // place that relay serves: its own location's relay (RELAY_RTT away, as far from the key's object as
  // the location is), or its continent's (placeOnContinents).
  const places = new Map<string, { farMs: number; nearMs: number; continent: string; hub: string }>();
  const hubs = new Map<string, number>();
  const locations = s.locations ?? LOCATIONS;
  // A location code as Cloudflare names one (`LOCATION_CODE`): relays are named by it.
  const locationOf = (slot: number) => `L${slot % locations}`;
  if (rule.aggregate === "location") {
    for (let k = 0; k < locations; k++) {
      const farMs = drawRtt(s.rtt, rtts);
      places.set(locationOf(k), { farMs, nearMs: nearRandom.uniform(RELAY_RTT.loMs, RELAY_RTT.hiMs), continent: continentAt(k, locations), hub: locationOf(k) });
      hubs.set(locationOf(k), farMs);
    }
  }
  if (rule.aggregate === "continent" || rule.aggregate === "auto") {
    const far = Array.from({ length: locations }, () => drawRtt(s.rtt, rtts));
    placeOnContinents(far, nearRandom).forEach(({ continent, nearMs, hubMs }, k) => {
      places.set(locationOf(k), { farMs: far[k]!, nearMs, continent, hub: continent });
      hubs.set(continent, hubMs);
    });
  }
  let relaysMade = 0;
  const relayFor = (name: string, hub: string, objectName: string): RelayObject | PoolRelayObject => {
    let relay = world.relays.get(name);
    if (!relay) {
      const farMs = hubs.get(hub)!;
      const send: SendBatch = (objectName, batch, onReply) => {
        totals.call(clock.now);
        deliver(farMs, () => objectFor(objectName), { batch, relayId: name }, onReply);
      };
      // PROTOTYPE: a relay that leases for its location syncs with the key's object as one peer.
      const sendSync: SendSync = (request, onReply) => {
        totals.call(clock.now);
        deliver(farMs, () => objectFor(objectName), { sync: request, kind: "background", lastsMs: POOL_LEASE_MS }, onReply);
      };
      const fresh = s.pooled
        ? new PoolRelayObject(clock, T0 + s.warmupMs, rule, `${name}#${relaysMade++}`, sendSync)
        : new RelayObject(clock, T0 + s.warmupMs, send);
      world.relays.set(name, (relay = fresh));
      // A relay restarts after a lifetime drawn as an isolate's: the next call meets a fresh one.
      if (Number.isFinite(s.lifetimeMs)) {
        clock.after(relayLives.exponential(s.lifetimeMs), () => {
          world.relays.delete(name);
          world.restartedRelays.push({ name, relay: fresh });
          fresh.reset();
        });
      }
    }
    return relay;
  };
  const link: Link = {
    clock,
    call(from, name, payload, onReply) {
      const reply = (r: Reply) => {
        if (from.alive) onReply(r);
      };
      if (payload.relay) {
        const { nearMs, hub } = places.get(from.location)!;
        return deliver(nearMs, () => relayFor(name, hub, payload.relay!.objectName), payload, reply);
      }
      totals.call(clock.now);
      deliver(from.rttMs, () => objectFor(name), payload, reply);
    },
  };

  // Isolates: one per slot, slot k at location k mod `locations`; a slot's isolate vanishes after an
  // exponential lifetime and a fresh one takes its place, at the same distance.
  const spawn = (slot: number, rttMs: number): void => {
    const id = `iso-${slot}-${world.born++}`;
    const location = locationOf(slot);
    const continent = places.get(location)?.continent ?? continentAt(slot % locations, locations);
    const isolate = s.mode === "fast" ? new FastIsolate(id, location, continent, rttMs, link, totals) : new StrictIsolate(id, location, continent, rttMs, link, s.coalesce);
    world.slots[slot] = isolate;
    if (Number.isFinite(s.lifetimeMs)) {
      clock.after(lifetimes.exponential(s.lifetimeMs), () => {
        isolate.vanish();
        spawn(slot, rttMs);
      });
    }
  };
  for (let slot = 0; slot < s.isolates; slot++) spawn(slot, places.get(locationOf(slot))?.farMs ?? drawRtt(s.rtt, rtts));

  const spread = new Zipf(s.isolates, s.spread === "skewed" ? 1 : 0);
  const keys = s.keys > 1 ? new Zipf(s.keys, s.zipf) : null;
  const end = T0 + s.durationMs;
  const arrivals = new Arrivals(s.shape, T0, arrivalsRandom);
  // Each key's name made once: the same string every request hashes once in every table it meets.
  const names: string[] = [];
  const traffic = {
    next: arrivals.after(T0),
    arrive() {
      const now = clock.now;
      const key = keys ? keys.pick(picks) : 0;
      const slot = keys ? homeOf(key, s.isolates, s.homes, picks) : spread.pick(picks);
      const name = (names[key] ??= `sim/${key}`);
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
