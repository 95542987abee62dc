/** Once a request's response is known: gives back what it took under each rule that does not count such a response (`count`), and charges each rule that reads its real cost from the response (`responseCost`). */
import { largestCharge } from "../algorithms";
import { givesNothingBackLate } from "../config/rules";
import type { Count } from "../config/types";
import { countError } from "../metrics/log";
import { headerUnits } from "../routing/key";
import { checkNoMore, describe } from "./arguments";
import { chargeOf, countedUnits, giveAllBack } from "./charge";
import type { ResponseHeaders } from "./result";
import type { Ask, LimiterContext, Taken } from "./index";

/**
 * Tells the rules how the request ended: its response's HTTP status (a status below 400 is a
 * success), or true or false for whether it succeeded, and the response's headers for a rule
 * that reads the request's real cost from one (`responseCost`; without them such a rule keeps the
 * request at its `cost`). A rule counting only failed requests gives back what a success took, one
 * counting only successes what a failure took. Resolves once they are back; only the first call
 * does anything.
 */
export type Settle = (outcome: number | boolean, headers?: ResponseHeaders) => Promise<void>;

/**
 * `{ settle }` when a rule that counts by response (`count` other than "all") or reads its cost
 * from it (`responseCost`) admitted the request, otherwise `{}`: every other rule's units stay
 * spent. A request never settled stays counted, at its `cost`.
 */
export function settleOf(taken: readonly { ask: Ask; taken: Taken }[], context: LimiterContext): { settle?: Settle } {
  const judged = taken.filter((t) => (t.ask.rule.count !== "all" || t.ask.rule.responseCost) && t.taken.decision.allowed);
  if (judged.length === 0) return {};
  let settled: Promise<void> | undefined;
  const settle: Settle = async (outcome, headers, ...extra: unknown[]) => {
    checkNoMore([outcome, headers, ...extra], 2, "settle", "the response's status or whether it succeeded, and its headers");
    const succeeded = succeededBy(outcome);
    const read = headers === undefined ? undefined : headersOf(headers);
    return (settled ??= Promise.all(judged.map((t) => settleOne(t, succeeded, read, context))).then(() => undefined));
  };
  return { settle };
}

/**
 * One rule's part: all of it given back when the rule does not count the request (what it was
 * charged too); otherwise, under a `responseCost`, charged the difference between what the
 * response says the request cost in all (counted as at most `largestCharge`) and what it is
 * counted at, code's charges included. A response that says nothing usable is counted in
 * `floodgate_errors_total{kind="response_cost"}` and logged, and the request stays counted at its
 * cost; so does one that says less under a bucket, which cannot give units back.
 */
async function settleOne({ ask, taken }: { ask: Ask; taken: Taken }, succeeded: boolean, headers: Headers | undefined, context: LimiterContext): Promise<void> {
  if (!counts(ask.rule.count, succeeded)) return giveAllBack(ask, taken, context);
  const header = ask.rule.responseCost?.header;
  if (header === undefined || headers === undefined) return;
  const failed = countError("response_cost", ask.rule);
  const raw = headers.get(header);
  const said = raw === null ? { error: `the response has no ${header} header` } : headerUnits(header, raw, "response");
  if ("error" in said) return failed(new Error(`${said.error}; the request stays counted at its cost, ${ask.cost}`));
  // The header says what the request cost in all: what code charged it already counts towards it.
  const difference = Math.min(said.units, largestCharge(ask.rule)) - countedUnits(ask, taken);
  if (difference === 0 || (difference < 0 && givesNothingBackLate(ask.rule.algorithm))) return;
  return chargeOf(ask, taken, context).charge!(difference).catch(failed);
}

/** Whether a rule that counts `count` keeps a request that ended so counted. */
function counts(count: Count, succeeded: boolean): boolean {
  return count === "all" || (count === "failed") !== succeeded;
}

/** The response's headers as given: a Headers, or a plain object or list of pairs (what crosses the service binding). */
function headersOf(headers: ResponseHeaders): Headers {
  try {
    return new Headers(headers);
  } catch {
    throw new TypeError(`settle: expected the response's headers (response.headers, or a plain object of names to values) as its second argument, got ${typeof headers === "object" ? "an object Headers cannot read" : typeof headers}`);
  }
}

/** An outcome as success or failure: a status below 400 succeeded. Anything but a status or a boolean is the caller's mistake. */
function succeededBy(outcome: unknown): boolean {
  if (typeof outcome === "boolean") return outcome;
  if (Number.isInteger(outcome) && (outcome as number) >= 100 && (outcome as number) <= 599) return (outcome as number) < 400;
  throw new TypeError(`settle: expected the response's HTTP status (100 to 599) or whether the request succeeded (true or false), got ${describe(outcome)}`);
}
