/** Strict keys their object just denied: the isolate denies the same request again, with no call, until the object's retryAfter. */
import { costlierUntil, mayAdmitMore, samePolicy, type Decision, type Policy } from "../algorithms";
import { LruTable } from "../fast/table";

/** Denied keys one isolate remembers; the least recently used is forgotten first. */
const MAX_DENIALS = 10_000;
/** Denials of different costs one key keeps at once: a window's or a log's costlier wait is known only from the object. */
const MAX_COSTS = 4;

interface Denial {
  decision: Decision;
  /** the cost that was denied: a cheaper request may still fit, so only this much or more is denied here */
  cost: number;
  until: number;
  /** the policy it was decided under, which says how much longer a costlier request waits */
  policy: Policy;
}

/** Refunds to one object: how many are on their way, and the mark of the last one sent or landed. */
interface GiveBacks {
  pending: number;
  mark: number;
}

/**
 * The object's `retryAfter` is the shortest wait before that same request could be admitted if
 * nothing else arrived. Until then, it and any costlier one are denied in the isolate: a refund
 * or a reset in between can only make this deny early, never admit over the limit.
 */
export class DenialCache {
  /** per key, its live denials, cheapest first: all at the limit, or all under a block */
  private readonly table = new LruTable<Denial[]>(MAX_DENIALS, () => undefined);
  private readonly giveBacks = new LruTable<GiveBacks>(MAX_DENIALS, () => undefined);
  private marks = 0;

  /** A mark taken before asking the object, for {@link remember}. */
  mark(): number {
    return this.marks;
  }

  /**
   * Units go back to the key's object: its denials are forgotten, and no denial asked for before the
   * units landed is remembered, nor any while they are on their way, since the object may have
   * decided it before they landed (a refund that outlived its timeout lands later still). Remembered
   * then, it denied the key until its retryAfter, an hour for a window of an hour, while the object
   * had room. Call the returned function once the units have landed or failed.
   */
  givingBack(objectName: string): () => void {
    this.table.delete(objectName);
    const giveBacks = this.giveBacks.get(objectName) ?? { pending: 0, mark: 0 };
    giveBacks.pending++;
    giveBacks.mark = ++this.marks;
    this.giveBacks.set(objectName, giveBacks);
    return () => {
      giveBacks.pending--;
      giveBacks.mark = ++this.marks;
      this.table.delete(objectName);
    };
  }

  /**
   * Remembers a denial at the limit or a block, made under `policy` and asked for at `asked` (a
   * {@link mark}); a cost over the capacity or an error says nothing about other requests.
   */
  remember(objectName: string, cost: number, decision: Decision, now: number, policy: Policy, asked = this.marks): void {
    if (decision.allowed || decision.retryAfter <= 0 || (decision.reason !== "limit" && decision.reason !== "blocked")) return;
    const giveBacks = this.giveBacks.peek(objectName);
    if (giveBacks && (giveBacks.pending > 0 || giveBacks.mark > asked)) return;
    const until = now + decision.retryAfter;
    // Another cost's denial stays while it agrees with this one: a costlier request waits no less, a
    // cheaper one no more. A block's denials stand only beside the same block's: those of every cost say
    // when one unit passes (`moreAt`), and a block started since, by a request asked of the object, moves that.
    const sameKind = (d: Denial) => (decision.reason === "blocked" ? d.decision.reason === "blocked" && d.decision.moreAt === decision.moreAt : d.decision.reason !== "blocked");
    const agrees = (d: Denial) => (d.cost < cost ? d.until <= until : d.cost > cost && d.until >= until);
    const kept = (this.table.peek(objectName) ?? []).filter((d) => d.until > now && sameKind(d) && samePolicy(d.policy, policy) && agrees(d));
    kept.push({ decision, cost, until, policy });
    kept.sort((a, b) => a.cost - b.cost);
    this.table.set(objectName, kept.slice(0, MAX_COSTS));
  }

  /**
   * The remembered denial of a request of `cost` at `now` under `policy`, its wait counted down;
   * undefined when none holds. One made under a policy this one may admit more than (code that
   * names one rule with a raised limit: a plan upgraded) says nothing of it: its object is asked.
   * Under a stricter one it holds (its wait may then be short: the retry asks the object).
   */
  lookup(objectName: string, cost: number, now: number, policy: Policy): Decision | undefined {
    const all = this.table.peek(objectName);
    if (all === undefined) return undefined;
    if (mayAdmitMore(policy, all[0]!.policy)) return undefined;
    // The costliest live denial this request is at least as costly as: they are kept cheapest first.
    let denial: Denial | undefined;
    for (const d of all) if (now < d.until && d.cost <= cost) denial = d;
    if (denial === undefined) {
      // Expired ones are dropped when the next is remembered, or here with the key once none holds.
      if (all.every((d) => now >= d.until)) this.table.delete(objectName);
      return undefined;
    }
    // Under a block a costlier request may wait past the block's end, for its units, by as much as only the object knows.
    const costlier = cost > denial.cost;
    const until = !costlier ? denial.until : denial.decision.reason === "blocked" ? undefined : costlierUntil(denial.policy, denial.cost, cost, denial.until);
    // How long a costlier request waits, only the object may know: it is asked (and its answer remembered beside this one).
    if (until === undefined) return undefined;
    // The object's figures at its denial: units may have come back since, which only the object can tell.
    const moreAt = Math.max(now, denial.decision.moreAt);
    // A block is what holds the key, remembered or not: it says so, as a fast key's does.
    const reason = denial.decision.reason === "blocked" ? "blocked" : "cache";
    // Under a stricter policy than the denial's (a plan downgraded), the request's own limit.
    return { ...denial.decision, limit: policy.limit, moreAt, resetAt: Math.max(now, denial.decision.resetAt), retryAfter: until - now, reason };
  }

  /** Whether the denial remembered for the key is a block: it denies any request, whatever it costs. */
  blocks(objectName: string): boolean {
    return this.table.peek(objectName)?.[0]?.decision.reason === "blocked";
  }

  forget(objectName: string): void {
    this.table.delete(objectName);
  }
}
