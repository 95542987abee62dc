/** A request's cost once it is known (tokens an LLM call used, bytes sent): more units taken after the fact, or some of what it took given back. */
import { givesNothingBackLate } from "../config/rules";
import { chargeFast, refundFast } from "../fast";
import { countError } from "../metrics/log";
import { chargeStrict, refundStrict } from "../strict";
import { fastContext, giveBack, unreturned, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Corrects what an admitted request is counted at by `units`: positive, they are taken now and
 * never denied, so the key may owe (a sliding window then denies until they leave it, a bucket
 * until its refill has paid them, owing a year's refill at most); negative, as many of the units
 * it took and was charged are given back, under a windowed rule only, the latest charges first.
 * Resolves once the object has them (a fast key: its isolate, and the object with the sync that
 * carries what the lease could not pay). A call the object fails is counted and logged, never
 * thrown: the request's own answer was already given. Bad units reject with a TypeError, and
 * change nothing.
 */
export type Charge = (units: number) => Promise<void>;

/** Units an admission was charged, each with when it was counted, for a give-back to find them: oldest first. */
const charges = new WeakMap<Taken, { units: number; at: number }[]>();

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
  const most = Math.floor(Number.MAX_SAFE_INTEGER / rule.periodMs);
  const charge: Charge = async (units) => {
    if (!Number.isSafeInteger(units) || Math.abs(units) > most) {
      throw new TypeError(`${where}: expected a whole number of units (negative to give some back), at most ${most} either way for a period of ${rule.periodMs}ms, got ${typeof units === "number" ? units : typeof units}`);
    }
    const why = units < 0 ? givesNothingBackLate(rule.algorithm) : undefined;
    if (why) throw new TypeError(`${where}: a "${rule.algorithm}" rule cannot give units back: ${why}; take the least a request can cost up front, and charge the rest once it is known`);
    if (units === 0 || !admitted) return;
    if (units < 0) return giveSome(-units);
    const fast = rule.mode === "fast";
    const at = await (fast ? chargeFast(fastContext(context), rule, ask.objectName, units) : chargeStrict(context.namespace, ask.objectName, rule, units)).catch((error: unknown) => {
      countError("charge", rule)(error);
      return undefined;
    });
    if (at !== undefined) charges.set(taken, [...(charges.get(taken) ?? []), { units, at }]);
  };
  const giveSome = async (units: number) => {
    const charged = chargedUnits(taken);
    const left = unreturned(ask, taken) + charged;
    if (units > left) {
      const came = ask.cost + charged - left;
      throw new TypeError(`${where}: cannot give back ${units} units: the request took ${ask.cost}${charged > 0 ? ` and was charged ${charged} more` : ""}, and ${came} of them came back already`);
    }
    const fromCharges = Math.min(units, charged);
    await Promise.all([giveBackCharged(ask, taken, fromCharges, context), giveBack(ask, taken, context, units - fromCharges)]);
  };
  return { charge };
}

/** Units the admission was charged and has not given back. */
function chargedUnits(taken: Taken): number {
  return (charges.get(taken) ?? []).reduce((sum, c) => sum + c.units, 0);
}

/**
 * Gives back everything the admission took and was charged: what `settle` does for a request its
 * rule does not count (a charged success under `count: "failed"` counts nothing).
 */
export function giveAllBack(ask: Ask, taken: Taken, context: LimiterContext): Promise<void> {
  return Promise.all([giveBack(ask, taken, context), giveBackCharged(ask, taken, chargedUnits(taken), context)]).then(() => undefined);
}

/**
 * Gives back `units` of what the admission was charged, the latest charges first, each where it
 * was counted; the ledger changes before anything is awaited, so concurrent calls never give
 * back one unit twice. A failure is counted, never thrown.
 */
function giveBackCharged(ask: Ask, taken: Taken, units: number, context: LimiterContext): Promise<void> {
  const kept = [...(charges.get(taken) ?? [])];
  const parts: { units: number; at: number }[] = [];
  for (let rest = units; rest > 0; ) {
    const last = kept.pop()!;
    const part = Math.min(rest, last.units);
    parts.push({ units: part, at: last.at });
    if (part < last.units) kept.push({ units: last.units - part, at: last.at });
    rest -= part;
  }
  charges.set(taken, kept);
  return Promise.all(
    parts.map(async ({ units: part, at }) => {
      if (ask.rule.mode === "fast") return refundFast(ask.objectName, part, at);
      const refund = refundStrict(context.namespace, ask.objectName, ask.rule, part, at).catch(countError("refund", ask.rule));
      context.waitUntil?.(refund);
      return refund;
    }),
  ).then(() => undefined);
}
