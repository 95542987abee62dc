/** The Durable Object that owns one (rule, key): every strict decision for it, in order, stored in SQLite. */
import { DurableObject } from "cloudflare:workers";
import { adjust, decide, peek } from "../algorithms";
import type { Decision, LimiterState, Policy } from "../algorithms";
import type { Env } from "../env";

/** One decision as the object made it; `countedAt` lets the caller refund it to the right window. */
export interface Decided {
  decision: Decision;
  countedAt: number;
}

interface Stored {
  policy: Policy;
  state: LimiterState;
}

/**
 * One object per (rule, key), addressed by name. Its methods are the RPC surface; each runs to
 * completion without awaiting, so decisions for a key are serialized and exact. State is read once
 * when the object starts and written through on every change, so eviction or a restart loses nothing;
 * an alarm deletes it once the key has fully recovered, so storage does not grow without bound.
 */
export class RateLimiter extends DurableObject<Env> {
  private stored: Stored | undefined;
  private alarmAt: number | null = null;
  /** The table is made on the first write, so a recovered key leaves no storage behind at all. */
  private hasTable = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      this.hasTable = ctx.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'limiter'").toArray().length > 0;
      const row = this.hasTable
        ? ctx.storage.sql.exec<{ value: string }>("SELECT value FROM limiter WHERE id = 1").toArray()[0]
        : undefined;
      this.stored = row ? (JSON.parse(row.value) as Stored) : undefined;
      this.alarmAt = await ctx.storage.getAlarm();
    });
  }

  /** Decides a batch of requests for this key, in order, as if each had arrived alone. */
  decide(policy: Policy, costs: number[]): Decided[] {
    const now = Date.now();
    let state = this.stateFor(policy);
    const results = costs.map((cost) => {
      const outcome = decide(policy, state, cost, now);
      state = outcome.state;
      return { decision: outcome.decision, countedAt: now };
    });
    if (state && results.some((r) => r.decision.allowed)) this.save(policy, state);
    return results;
  }

  /** Gives back units a request took here when another rule denied it. */
  refund(policy: Policy, units: number, countedAt: number): void {
    const now = Date.now();
    this.save(policy, adjust(policy, this.stateFor(policy), -units, countedAt, now));
  }

  /** The key's standing now, consuming nothing. */
  peek(policy: Policy): Decision {
    return peek(policy, this.stateFor(policy), Date.now());
  }

  /** Forgets the key: its next request starts from a full quota. */
  async reset(): Promise<void> {
    this.stored = undefined;
    this.alarmAt = null;
    this.hasTable = false;
    await this.ctx.storage.deleteAll();
  }

  /** Deletes the state once the key is back to its full quota; otherwise looks again when it will be. */
  override async alarm(): Promise<void> {
    this.alarmAt = null;
    if (!this.stored) return;
    const { resetAt } = peek(this.stored.policy, this.stored.state, Date.now());
    if (resetAt <= Date.now()) await this.reset();
    else this.schedule(resetAt);
  }

  private stateFor(policy: Policy): LimiterState | undefined {
    return this.stored?.policy.algorithm === policy.algorithm ? this.stored.state : undefined;
  }

  private save(policy: Policy, state: LimiterState): void {
    this.stored = { policy, state };
    if (!this.hasTable) {
      this.ctx.storage.sql.exec("CREATE TABLE limiter (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL)");
      this.hasTable = true;
    }
    this.ctx.storage.sql.exec(
      "INSERT INTO limiter (id, value) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value",
      JSON.stringify(this.stored),
    );
    if (this.alarmAt === null) this.schedule(peek(policy, state, Date.now()).resetAt);
  }

  private schedule(at: number): void {
    this.alarmAt = at;
    void this.ctx.storage.setAlarm(at);
  }
}
