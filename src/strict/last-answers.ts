/** What each strict key's object last told this isolate was used: where onError "local" starts when the object falls silent. */
import { largestCost, type Decision, type Policy } from "../algorithms";
import { LruTable } from "../fast/table";
import { ALONE, unheardPeers, type Share } from "../limiter/local-share";

/** Strict keys one isolate remembers an answer for; the least recently used is forgotten first. */
const MAX_ANSWERS = 10_000;

interface Answer {
  /** units the answer counted as used, out of its rule's capacity then: a rule changed since reads them against its own */
  used: number;
  heardAt: number;
}

/**
 * An object that falls behind under load would otherwise leave each isolate's local fallback a
 * whole limit on top of what the object had admitted. The object never counts what the fallback
 * admitted, so the fallback keeps its own count beside the answer (see ../limiter/local-share). A
 * concurrency key's answer is neither kept nor read (one kept while the rule of that name was
 * another algorithm included): its slots come back by releases the local count never sees, and
 * would stay taken there for a whole `slotTtl`.
 */
export class LastAnswers {
  private readonly table = new LruTable<Answer>(MAX_ANSWERS, () => undefined);
  /** rules (by name) one of whose objects has answered this isolate */
  private readonly heardRules = new Set<string>();
  /** when the local fallback was first asked for each rule none of whose objects has answered yet */
  private readonly coldSince = new Map<string, number>();

  heard(rule: string, policy: Policy, objectName: string, decision: Decision, at: number): void {
    this.heardRules.add(rule);
    this.coldSince.delete(rule);
    if (policy.algorithm !== "concurrency") this.table.set(objectName, { used: largestCost(policy) - decision.remaining, heardAt: at });
  }

  /**
   * The key's share for the local fallback under `policy`: the object's last answer, or the whole
   * limit when it has none here, but none while no object of the `rule` has answered this isolate,
   * as for a fast rule (see `unheardPeers`): at a deploy whose isolates find a global key's object
   * overloaded, each would otherwise admit the whole limit.
   */
  shareOf(rule: string, policy: Policy, objectName: string, now: number): Share {
    const answer = policy.algorithm === "concurrency" ? undefined : this.table.peek(objectName);
    if (answer) return { peers: 1, free: largestCost(policy) - answer.used, heardAt: answer.heardAt, apart: true };
    if (this.heardRules.has(rule)) return ALONE;
    const since = this.coldSince.get(rule) ?? now;
    this.coldSince.set(rule, since);
    return { ...ALONE, peers: unheardPeers(0, now - since) };
  }

  forget(objectName: string): void {
    this.table.delete(objectName);
  }
}
