/** The Durable Object that owns one (rule, key): every strict decision for it, in order, stored in SQLite. */
import { DurableObject } from "cloudflare:workers";
import { adjust, carryOver, countedAt, decide, peek } from "../algorithms";
import type { Decision, LimiterState, Policy } from "../algorithms";
import { blockedDecision, blockStart } from "../algorithms/block";
import type { Env } from "../env";
import { grantLease, lastPinEnds, livePeers, settlePins, standingWithPins, type Lease, type Peer, type SyncRequest } from "../fast/lease";

/** One decision as the object made it; `countedAt` lets the caller refund it to the right window. */
export interface Decided {
  decision: Decision;
  countedAt: number;
}

/** How long a fast-mode isolate's last answer is kept for its retries after it last synced. */
const RETRY_WINDOW_MS = 60_000;

interface Stored {
  policy: Policy;
  state: LimiterState;
}

/** The one row an object keeps: its state, if any, its fast-mode peers, and the end of its block. */
interface Row {
  stored?: Stored;
  peers: Record<string, Peer>;
  blockedUntil?: number;
}

/**
 * One object per (rule, key), addressed by name. Its methods are the RPC surface; each runs to
 * completion without awaiting, so decisions for a key are serialized and exact. State is read once
 * when the object starts and written through, as one row, on every change, so eviction or a restart
 * loses nothing; an alarm deletes it once the key has fully recovered, so storage does not grow
 * without bound.
 */
export class RateLimiter extends DurableObject<Env> {
  private stored: Stored | undefined;
  /** fast-mode isolates: their demand, and their last lease for retried syncs */
  private peers = new Map<string, Peer>();
  private alarmAt: number | null = null;
  /** a rule with `block` denied the key: every request is denied until then */
  private blockedUntil = 0;
  /** The table is made on the first write, so a recovered key leaves no storage behind at all. */
  private hasTable = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      this.hasTable = ctx.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'limiter'").toArray().length > 0;
      const raw = this.hasTable
        ? ctx.storage.sql.exec<{ value: string }>("SELECT value FROM limiter WHERE id = 1").toArray()[0]
        : undefined;
      const row = raw ? (JSON.parse(raw.value) as Row) : undefined;
      this.stored = row?.stored;
      this.blockedUntil = row?.blockedUntil ?? 0;
      this.peers = livePeers(new Map(Object.entries(row?.peers ?? {})), Date.now());
      this.alarmAt = await ctx.storage.getAlarm();
    });
  }

  /** Decides a batch of requests for this key, in order, as if each had arrived alone. */
  decide(policy: Policy, costs: number[]): Decided[] {
    const now = Date.now();
    this.countAllPins(policy, now);
    let state = this.stateFor(policy);
    const blockedBefore = this.blockedUntil;
    const results = costs.map((cost) => {
      if (now < this.blockedUntil) return { decision: blockedDecision(policy, state, this.blockedUntil, now), countedAt: now };
      const outcome = decide(policy, state, cost, now);
      state = outcome.state;
      const block = blockStart(policy, outcome.decision, now);
      if (block !== undefined) this.blockedUntil = block;
      const decision = block === undefined ? outcome.decision : blockedDecision(policy, state, block, now);
      return { decision, countedAt: countedAt(policy, outcome.state, now) };
    });
    if (state && (results.some((r) => r.decision.allowed) || this.blockedUntil !== blockedBefore)) this.save(policy, state);
    return results;
  }

  /**
   * Reconciles one fast-mode isolate: counts what it reports spent, frees what it gives back, and
   * leases it more, sized by its demand. A retried sync (same isolate and seq) gets the same answer
   * and changes nothing.
   */
  sync(policy: Policy, request: SyncRequest): Lease {
    const now = Date.now();
    const stored = this.stateFor(policy);
    const { state, peers, lease, blockedUntil } = grantLease(policy, stored, this.peers, request, now, this.blockedUntil);
    if (lease === this.peers.get(request.isolate)?.lease) return lease;
    this.peers = peers;
    this.blockedUntil = blockedUntil;
    if (state && state !== stored) this.stored = { policy, state };
    this.write();
    if (this.alarmAt === null) this.schedule(now + RETRY_WINDOW_MS);
    return lease;
  }

  /** Gives back units a request took here when another rule denied it. */
  refund(policy: Policy, units: number, countedAt: number): void {
    const now = Date.now();
    this.save(policy, adjust(policy, this.stateFor(policy), -units, countedAt, now));
  }

  /** The key's standing now, consuming nothing. */
  peek(policy: Policy): Decision {
    const now = Date.now();
    if (now < this.blockedUntil) return blockedDecision(policy, this.stateFor(policy), this.blockedUntil, now);
    return standingWithPins(policy, this.stateFor(policy), this.peers, now);
  }

  /** Forgets the key: its next request starts from a full quota. */
  async reset(): Promise<void> {
    this.stored = undefined;
    this.peers = new Map();
    this.blockedUntil = 0;
    this.alarmAt = null;
    this.hasTable = false;
    await this.ctx.storage.deleteAll();
  }

  /**
   * Deletes everything once the key is back to its full quota and no isolate has synced for a
   * minute (long enough for any retry to find its answer); otherwise looks again when that will be.
   */
  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const now = Date.now();
    if (this.stored) {
      const { policy } = this.stored;
      const settled = settlePins(policy, this.stored.state, this.peers, now);
      if (settled.state && settled.state !== this.stored.state) {
        this.stored = { policy, state: settled.state };
        this.peers = settled.peers;
        this.write();
      }
    }
    const recovered = this.stored ? peek(this.stored.policy, this.stored.state, now).resetAt : now;
    const lastSync = Math.max(0, ...[...this.peers.values()].map((p) => p.seenAt));
    const due = Math.max(recovered, lastSync + RETRY_WINDOW_MS, lastPinEnds(this.peers) ?? 0, this.blockedUntil);
    if (due <= now) return this.reset();
    this.forgetSilentPeers(now);
    this.schedule(due);
  }

  /**
   * A key whose rule turned from fast to strict: its isolates' outstanding leases are counted as
   * spent now, since strict decisions do not look at pins. Their late reports are then ignored.
   */
  private countAllPins(policy: Policy, now: number): void {
    // Every strict decision asks, so the peers are walked without copying them.
    let pinned = false;
    for (const peer of this.peers.values()) if (peer.pins.length > 0) pinned = true;
    if (!pinned) return;
    const settled = settlePins(policy, this.stateFor(policy), this.peers, now, true);
    if (settled.state) this.stored = { policy, state: settled.state };
    this.peers = settled.peers;
    this.write();
  }

  /**
   * The state to decide `policy` from. A request from a Worker version or rule with another
   * algorithm carries what the stored one used over; one naming an algorithm this version does
   * not know throws before anything changes, and its caller's `onError` decides.
   */
  private stateFor(policy: Policy): LimiterState | undefined {
    return this.stored && carryOver(this.stored.policy, this.stored.state, policy, Date.now());
  }

  private save(policy: Policy, state: LimiterState): void {
    this.stored = { policy, state };
    this.write();
    if (this.alarmAt === null) this.schedule(peek(policy, state, Date.now()).resetAt);
  }

  private forgetSilentPeers(now: number): void {
    const live = livePeers(this.peers, now);
    if (live.size === this.peers.size) return;
    this.peers = live;
    this.write();
  }

  /** Writes the state and the peers as one row: one statement per change. */
  private write(): void {
    if (!this.hasTable) {
      this.ctx.storage.sql.exec("CREATE TABLE limiter (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL)");
      this.hasTable = true;
    }
    const row: Row = {
      ...(this.stored ? { stored: this.stored } : {}),
      peers: Object.fromEntries(this.peers),
      ...(this.blockedUntil > 0 ? { blockedUntil: this.blockedUntil } : {}),
    };
    this.ctx.storage.sql.exec(
      "INSERT INTO limiter (id, value) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value",
      JSON.stringify(row),
    );
  }

  private schedule(at: number): void {
    this.alarmAt = at;
    void this.ctx.storage.setAlarm(at);
  }
}
