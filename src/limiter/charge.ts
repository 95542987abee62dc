/** A request's cost once it is known (tokens an LLM call used, bytes sent): more units taken after the fact, or some of what it took given back. */
import { givesNothingBackLate } from "../config/rules";
import { chargeFast } from "../fast";
import { countError } from "../metrics/log";
import { chargeStrict } from "../strict";
import { fastContext, giveBack, unreturned, type Ask, type LimiterContext, type Taken } from "./index";

/**
 * Corrects what an admitted request is counted at by `units`: positive, they are taken now and
 * never denied, so the key may owe (a sliding window then denies until they leave it, a bucket
 * until its refill has paid them); negative, as many of the units the admission took are given
 * back, under a windowed rule only. Resolves once the object has them (a fast key: its isolate,
 * and the object with the sync that carries what the lease could not pay). A call the object
 * fails is counted in `floodgate_errors_total{kind="charge"}` and logged, never thrown: the
 * request's own answer was already given. Bad units reject with a TypeError, and change nothing.
 */
export type Charge = (units: number) => Promise<void>;

/** `{ charge }` when a rule that counts units (every algorithm but concurrency) admitted the request, otherwise `{}`. */
export function chargeOf(ask: Ask, taken: Taken, context: LimiterContext): { charge?: Charge } {
  const { rule } = ask;
  if (rule.algorithm === "concurrency" || !taken.decision.allowed) return {};
  const where = `charge ("${rule.name}")`;
  const most = Math.floor(Number.MAX_SAFE_INTEGER / rule.periodMs);
  const charge: Charge = async (units) => {
    if (!Number.isSafeInteger(units) || Math.abs(units) > most) {
      throw new TypeError(`${where}: expected a whole number of units (negative to give some back), at most ${most} either way for a period of ${rule.periodMs}ms, got ${typeof units === "number" ? units : typeof units}`);
    }
    if (units < 0) return giveSome(-units);
    if (units === 0) return;
    const fast = rule.mode === "fast";
    const taking = fast ? chargeFast(fastContext(context), rule, ask.objectName, units) : chargeStrict(context.namespace, ask.objectName, rule, units);
    await taking.catch(countError("charge", rule));
  };
  const giveSome = async (units: number) => {
    const why = givesNothingBackLate(rule.algorithm);
    if (why) throw new TypeError(`${where}: a "${rule.algorithm}" rule cannot give units back: ${why}; take the least a request can cost up front, and charge the rest once it is known`);
    const left = unreturned(ask, taken);
    if (units > left) throw new TypeError(`${where}: cannot give back ${units} units: the request took ${ask.cost}, and ${ask.cost - left} of them came back already`);
    await giveBack(ask, taken, context, units);
  };
  return { charge };
}
