/** A request's cost once it is known (tokens an LLM call used, bytes sent): more units taken after the fact, or some of what it took given back. */
import { largestCharge } from "../algorithms";
import { givesNothingBackLate } from "../config/rules";
import { chargeFast, unchargeFast } from "../fast";
import { countError } from "../metrics/log";
import { metrics } from "../metrics/metrics";
import { chargeStrict } from "../strict";
import { checkNoMore, describe } from "./arguments";
import { fastContext, giveBack, refundAt, unreturned, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Corrects what an admitted request is counted at by `units`: positive, they are taken now and
 * never denied, so the key may owe (a sliding window then denies until they leave it, a bucket
 * until its refill has paid them, owing a year's refill at most); negative, as many of the units
 * it took and was charged are given back, under a windowed rule only, the latest charges first.
 * Resolves once the object has them (a fast key: once this isolate has; its object hears of what
 * the lease could not pay with the key's booked call, 20 s at the latest). A call the object
 * fails is counted and logged, never thrown: the request's own answer was already given. Bad
 * units reject with a TypeError, and change nothing.
 */
export type Charge = (units: number) => Promise<void>;

/** What an admission was charged: each charge counted, with when, oldest first; those on their way; and whether `settle` gave it all back, after which nothing more is charged. */
interface Account {
  charged: { units: number; at: number }[];
  pending: Set<Promise<unknown>>;
  forgiven: boolean;
}

const accounts = new WeakMap<Taken, Account>();

function accountOf(taken: Taken): Account {
  let account = accounts.get(taken);
  if (!account) accounts.set(taken, (account = { charged: [], pending: new Set(), forgiven: false }));
  return account;
}

/**
 * `{ charge }` when a rule of units (every algorithm but concurrency) admitted the request, or a
 * dry-run rule would have denied it (which consumed nothing, so is charged nothing: code that
 * charges every success runs as if the rule were not there), otherwise `{}`.
 */
export function chargeOf(ask: Ask, taken: Taken, context: LimiterContext): { charge?: Charge } {
  const { rule } = ask;
  const admitted = taken.decision.allowed;
  if (rule.algorithm === "concurrency" || (!admitted && !rule.dryRun)) return {};
  const where = `charge ("${rule.name}")`;
  const charge: Charge = async (units, ...extra: unknown[]) => {
    checkNoMore([units, ...extra], 1, where, "a whole number of units");
    if (!Number.isInteger(units)) throw new TypeError(`${where}: expected a whole number of units (negative to give some back), got ${describe(units)}`);
    const why = units < 0 ? givesNothingBackLate(rule.algorithm) : undefined;
    if (why) throw new TypeError(`${where}: a "${rule.algorithm}" rule cannot give units back: ${why}; take the least a request can cost up front, and charge the rest once it is known`);
    if (units === 0 || !admitted) return;
    if (units < 0) return giveSome(-units);
    const account = accountOf(taken);
    if (account.forgiven) return;
    // In the ledger before it resolves, so a settle waiting on it finds it there.
    const landing = take(ask, Math.min(units, largestCharge(rule)), context).then((counted) => {
      if (counted) account.charged.push(counted);
    });
    account.pending.add(landing);
    await landing;
    account.pending.delete(landing);
  };
  const giveSome = async (units: number) => {
    const account = accountOf(taken);
    await Promise.all(account.pending);
    const charged = chargedUnits(taken);
    const left = unreturned(ask, taken) + charged;
    if (units > left) throw new TypeError(`${where}: cannot give back ${units} unit${units === 1 ? "" : "s"}: the request is counted at ${left} now (it took ${ask.cost}; charges and give-backs since count too)`);
    const fromCharges = Math.min(units, charged);
    metrics.count("floodgate_charged_units_total", { rule: rule.name, direction: "given_back" }, units);
    await Promise.all([giveBackCharged(ask, taken, fromCharges, context), giveBack(ask, taken, context, units - fromCharges)]);
  };
  return { charge };
}

/** Takes `units` at the key for a request it admitted: what was counted and when, or undefined when the object failed (counted and logged). */
async function take(ask: Ask, units: number, context: LimiterContext): Promise<{ units: number; at: number } | undefined> {
  const { rule, objectName } = ask;
  const counted = rule.mode === "fast" ? Promise.resolve(chargeFast(fastContext(context), rule, objectName, units)) : chargeStrict(context.namespace, objectName, rule, units);
  return counted.then(
    (at) => {
      metrics.count("floodgate_charged_units_total", { rule: rule.name, direction: "taken" }, units);
      return { units, at };
    },
    (error: unknown) => {
      countError("charge", rule)(error);
      return undefined;
    },
  );
}

/** Units the admission was charged and has not given back. */
function chargedUnits(taken: Taken): number {
  return (accounts.get(taken)?.charged ?? []).reduce((sum, c) => sum + c.units, 0);
}

/** Units the admission is counted at now: what it took and was charged, less what came back. */
export function countedUnits(ask: Ask, taken: Taken): number {
  return unreturned(ask, taken) + chargedUnits(taken);
}

/**
 * Gives back everything the admission took and was charged, charges on their way included once
 * they land, and charges nothing after: what `settle` does for a request its rule does not count
 * (a charged success under `count: "failed"` counts nothing).
 */
export async function giveAllBack(ask: Ask, taken: Taken, context: LimiterContext): Promise<void> {
  const account = accountOf(taken);
  account.forgiven = true;
  const ownBack = giveBack(ask, taken, context);
  await Promise.all(account.pending);
  await Promise.all([ownBack, giveBackCharged(ask, taken, chargedUnits(taken), context)]);
}

/**
 * Gives back `units` of what the admission was charged, the latest charges first, each where it
 * was counted; the ledger changes before anything is awaited, so concurrent calls never give
 * back one unit twice. A failure is counted, never thrown.
 */
function giveBackCharged(ask: Ask, taken: Taken, units: number, context: LimiterContext): Promise<void> {
  const account = accountOf(taken);
  const kept = [...account.charged];
  const parts: { units: number; at: number }[] = [];
  for (let rest = units; rest > 0; ) {
    const last = kept.pop()!;
    const part = Math.min(rest, last.units);
    parts.push({ units: part, at: last.at });
    if (part < last.units) kept.push({ units: last.units - part, at: last.at });
    rest -= part;
  }
  account.charged = kept;
  const fast = ask.rule.mode === "fast";
  return Promise.all(parts.map(({ units: part, at }) => (fast ? Promise.resolve(unchargeFast(context.namespace, ask.objectName, part, at)) : refundAt(ask, part, { countedAt: at }, context)))).then(() => undefined);
}
