/** What each strict key's object last told this isolate was left: where onError "local" starts when the object falls silent. */
import type { Decision } from "../algorithms";
import type { Rule } from "../config/types";
import { LruTable } from "../fast/table";
import { ALONE, type Share } from "../limiter/local-share";

/** Strict keys one isolate remembers an answer for; the least recently used is forgotten first. */
const MAX_ANSWERS = 10_000;

/**
 * Without it, an object that fell behind under load (calls past the rule's timeout) left each
 * isolate's local fallback a whole limit on top of what the object had admitted: a flood of 4,000
 * requests on 40 keys of a limit of 10 let 453 through. The object never counts what the fallback
 * admitted, so the fallback's counters keep their own count and take an answer's only when it says
 * more is used (see ../limiter/local-share). A concurrency key's answer is not kept: its slots come
 * back by releases the local counters never see, and would stay taken there for a whole `slotTtl`.
 */
export class LastAnswers {
  private readonly table = new LruTable<Share>(MAX_ANSWERS, () => undefined);

  heard(rule: Rule, objectName: string, decision: Decision, at: number): void {
    if (rule.algorithm !== "concurrency") this.table.set(objectName, { peers: 1, free: decision.remaining, heardAt: at, apart: true });
  }

  /** The key's share for the local fallback: the object's last answer, or {@link ALONE} when it has none here. */
  shareOf(objectName: string): Share {
    return this.table.peek(objectName) ?? ALONE;
  }

  forget(objectName: string): void {
    this.table.delete(objectName);
  }
}
