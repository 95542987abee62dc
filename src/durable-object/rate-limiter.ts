/** The Durable Object that owns one (rule, key): every strict decision for it, in order, stored in SQLite. */
import { DurableObject } from "cloudflare:workers";
import { adjust, mostCharged, mostOwed, peek } from "../algorithms";
import type { Decision, LimiterState, Policy } from "../algorithms";
import { blockedDecision, blockEnd, blockFrom, decideBatch, type Block, type Decided } from "../algorithms/block";
import { fromBefore, fromCarry, keepsCarried, keptBefore, recoveredAt, stateFor, type Stored } from "../algorithms/kept";
import { heldUnder, renewConcurrency, ttlRaised } from "../algorithms/concurrency";
import type { Env } from "../env";
import { grantLease, standingWithPins, type Lease, type Spent, type SyncRequest } from "../fast/lease";
import { isLive, lastPinEnds, livePeers, PEER_TTL_MS, PEERS_KEPT_TILL_DUE, stricter, type Peer } from "../fast/peer";
import { indexPeers, leasePolicy, removePeer, settlePins, type PeerIndex } from "../fast/peer-index";
import { RelayBook, type Forwarded, type Relayed } from "../fast/relay";
import { alarmSpread, RETRY_WINDOW_MS } from "./alarm";
import { Relay } from "./relay";
import { ownNamespace } from "./stub";

export type { Decided };

/** The object's tables: its own row, and one row per fast-mode isolate. */
const TABLES = {
  limiter: "CREATE TABLE IF NOT EXISTS limiter (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL)",
  peers: "CREATE TABLE IF NOT EXISTS peers (id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
} as const;

/** The object's own row: its state, if any, and the end of its block. */
interface Row {
  stored?: Stored;
  blockedUntil?: number;
  /** when that block started, so that a rule whose block was removed or shortened since frees the key by its new terms */
  blockedSince?: number;
  /** an object written by an earlier version kept its peers here; they move to their own rows */
  peers?: Record<string, Peer>;
}

/** How far ahead an object sets its alarm at most: a key owing for longer is looked at again then. */
const MAX_ALARM_AHEAD_MS = 30 * 24 * 3_600_000;


/**
 * One object per (rule, key), addressed by name. Its methods are the RPC surface; each runs to
 * completion without awaiting, so decisions for a key are serialized and exact. State is read once
 * when the object starts and written through, as one row, on every change, so eviction or a restart
 * loses nothing; an alarm deletes it once the key has fully recovered, so storage does not grow
 * without bound.
 */
export class RateLimiter extends DurableObject<Env> {
  private stored: Stored | undefined;
  /** fast-mode isolates: their demand, and their last lease for retried syncs, with the figures a sync reads (built from their rows) */
  private peers: PeerIndex = indexPeers();
  private alarmAt: number | null = null;
  /** a rule with `block` denied the key: every request is denied until its end */
  private block: Block = { until: 0, since: 0 };
  /** the last call booked for a fast-mode isolate (see src/fast/schedule.ts); kept in memory, as a restart only loosens the pacing for a moment */
  private cursor = Number.NEGATIVE_INFINITY;
  /** the strictest policy strict decisions asked under lately, which fast leases are granted under too; in memory, as the next strict request says it again */
  private strictAsked: { policy: Policy; at: number } | undefined;
  /**
   * when each algorithm was last asked under, by a decision or a sync: a state kept under one that
   * another live Worker version still asks under is not replaced by its carry-over (see `keepsCarried`);
   * in memory, as a restart is a new deployment's
   */
  private readonly algorithmsAsked = new Map<string, number>();
  /**
   * Which tables exist. Each is made on its first write, so a recovered key leaves no storage
   * behind at all, and a strict key never makes the peers table: making a table writes two rows.
   */
  private readonly tables = { limiter: false, peers: false };
  /** this object's delay on every alarm (see `schedule`), from its id */
  private spreadMs: number | undefined;
  /** made when this object is a location's relay (see ../fast/relay) */
  private relayed: Relay | undefined;
  /** the relays that forward this key's syncs, to pace them */
  private readonly relays = new RelayBook();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      const made = ctx.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('limiter', 'peers')").toArray();
      for (const { name } of made) this.tables[name as keyof typeof TABLES] = true;
      const raw = this.tables.limiter
        ? ctx.storage.sql.exec<{ value: string }>("SELECT value FROM limiter WHERE id = 1").toArray()[0]
        : undefined;
      const row = raw ? (JSON.parse(raw.value) as Row) : undefined;
      this.stored = row?.stored;
      this.block = { until: row?.blockedUntil ?? 0, since: row?.blockedSince ?? 0 };
      const rows = this.tables.peers ? ctx.storage.sql.exec<{ id: string; value: string }>("SELECT id, value FROM peers").toArray() : [];
      const now = Date.now();
      this.peers = indexPeers(livePeers(new Map(rows.map((r) => [r.id, JSON.parse(r.value) as Peer])), now), now);
      // Those it forgets go from storage too: left there, a lightly used monthly key read every
      // isolate it had ever heard from at each start, until its window's end deleted them.
      this.writePeers(rows.map((r) => r.id).filter((id) => !this.peers.peers.has(id)));
      if (row?.peers) {
        // Written by an earlier version, which kept every peer in this row: each moves to its own.
        const before = this.peers.peers;
        this.peers = indexPeers(livePeers(new Map(Object.entries(row.peers)), now), now);
        this.writePeers([...new Set([...before.keys(), ...this.peers.peers.keys()])]);
        this.write();
      }
      this.alarmAt = await ctx.storage.getAlarm();
    });
  }

  /**
   * Decides a batch of requests for this key, in order, as if each had arrived alone; first counts
   * `unsent`, what the calling isolate's onError admitted that no decision here counted (see
   * ../strict/unsent), each where it was admitted, as a fast key's `unleased` admissions are: a
   * bucket owes at most `mostOwed`, a period's wait (counted as a charge is, a key of 60 a minute
   * handed 600 such units refused for nine minutes).
   */
  decide(policy: Policy, costs: number[], unsent: readonly Spent[] = []): Decided[] {
    const now = Date.now();
    this.heardStrict(policy, now);
    this.countAllPins(policy, now);
    const blockedBefore = blockEnd(policy, this.block);
    const stored = stateFor(this.stored, policy, now);
    // Not as slots, which are requests in flight: units the rate rule of that name admitted, taken as slots, nothing would release for a whole slotTtl.
    const counting = policy.algorithm === "concurrency" ? [] : unsent;
    const from = counting.reduce((state, { at, units }) => adjust(policy, state, units, Math.min(at, now), now, mostOwed(policy)), stored);
    const batch = decideBatch(policy, from, blockedBefore, costs, now);
    const { blockedUntil, results } = batch;
    // A blocked key runs no algorithm: its slots are read under a longer TTL here, as a decision reads them.
    const state = heldUnder(policy, batch.state, now);
    if (blockedUntil !== blockedBefore) this.block = blockFrom(this.block, blockedUntil, now);
    const counted = counting.reduce((sum, u) => sum + u.units, 0);
    const units = results.reduce((sum, r, i) => sum + (r.decision.allowed ? costs[i]! : 0), counted);
    if (state && (this.keepsCarried(stored, now) || units > 0 || blockedUntil !== blockedBefore || ttlRaised(from, state))) {
      const before = keptBefore(this.stored, policy, units, now, (algorithm) => this.askedLately(algorithm, now));
      this.save(policy, state, now, { ...(fromCarry(this.stored, stored) && units === 0 ? { carried: true } : {}), ...(before ? { before } : {}) });
    }
    this.algorithmsAsked.set(policy.algorithm, now);
    return results;
  }

  /**
   * Reconciles one fast-mode isolate: counts what it reports spent, frees what it gives back, and
   * leases it more, sized by its demand, under the strictest policy a live isolate or a recent
   * strict decision asked under. A retried sync (same isolate and seq) gets the same answer and
   * changes nothing.
   */
  sync(policy: Policy, request: SyncRequest): Lease {
    const now = Date.now();
    const under = leasePolicy(policy, request.isolate, this.peers, now, this.recentStrict(now));
    const stored = stateFor(this.stored, under, now);
    const blockedBefore = blockEnd(under, this.block);
    const granted = grantLease(under, stored, this.peers, request, now, blockedBefore, this.cursor, policy);
    const { state, lease } = granted;
    if (granted.changed.length === 0) return lease;
    this.cursor = granted.cursor;
    this.writePeers(granted.changed);
    // The state is kept under `under`, which may be another version's policy: that is the algorithm asked under.
    this.algorithmsAsked.set(under.algorithm, now);
    if (granted.blockedUntil !== blockedBefore || (state && (state !== stored || this.keepsCarried(stored, now)))) {
      if (granted.blockedUntil !== blockedBefore) this.block = blockFrom(this.block, granted.blockedUntil, now);
      if (state) this.stored = { policy: under, state, ...(fromCarry(this.stored, stored) && state === stored ? { carried: true as const } : {}), ...this.keptFor(under) };
      this.write();
    }
    // With many peers the object looks at them every minute or so (see `alarm`): an alarm set further off, before they came, is brought forward, once.
    const soon = now + RETRY_WINDOW_MS;
    if (this.alarmAt === null || (this.peers.peers.size > PEERS_KEPT_TILL_DUE && this.alarmAt > this.alarmFor(soon))) this.schedule(soon);
    return lease;
  }

  /**
   * Several isolates' syncs in one call, as a location's relay forwards them: each applied as
   * {@link sync} applies it, in order. One that throws (a policy this version cannot read, from
   * another Worker version) fails alone, with its message, and the others are answered. The relay
   * is told how long to wait before its next batch: its share of the calls this object takes from
   * all its relays.
   */
  syncAll(relay: string, batch: Forwarded[]): Relayed {
    const answers = batch.map(({ policy, request }) => {
      try {
        return this.sync(policy, request);
      } catch (error) {
        return { error: error instanceof Error ? error.message : String(error) };
      }
    });
    return { answers, gapMs: this.relays.heard(relay, Date.now()) };
  }

  /**
   * As the relay of a location (an object named by `relayName`, ../fast/relay): forwards one
   * isolate's sync to the key's object `objectName` in a batch with the others waiting here, and
   * answers with its lease. The key's object then hears from each location at most once per
   * RELAY_GAP_MS, however many isolates the location runs.
   */
  relay(objectName: string, forwarded: Forwarded, timeoutMs: number): Promise<Lease> {
    this.relayed ??= new Relay(ownNamespace(this.env, this.ctx.id));
    return this.relayed.forward(objectName, forwarded, timeoutMs);
  }

  /**
   * Gives back units a request took here when another rule denied it, or a concurrency request's
   * slot, where they are counted: in the key's state, or in its algorithm's state kept from before
   * (see Stored's `before`). Not when the state is only another algorithm's (another live Worker
   * version's): the units cannot be found where it counted them, so they stay counted and age as it
   * ages them; carried over to be given back, its units became this algorithm's.
   */
  refund(policy: Policy, units: number, countedAt: number): void {
    const now = Date.now();
    const state = stateFor(this.stored, policy, now);
    if (fromCarry(this.stored, state) && !fromBefore(this.stored, state)) return;
    this.keep(policy, state, adjust(policy, state, -units, countedAt, now), now);
  }

  /**
   * Takes units a request turned out to cost once it was over (a LimitResult's `charge`): counted
   * now, with no decision, so the key may owe and deny until they age out or refill (a bucket owes
   * at most `mostCharged`). Counted as a decision's units are, another live version's algorithm
   * included. Returns when they were counted, for a refund to find them.
   */
  charge(policy: Policy, units: number): number {
    const now = Date.now();
    const state = adjust(policy, stateFor(this.stored, policy, now), units, now, now, mostCharged(policy));
    const before = keptBefore(this.stored, policy, units, now, (algorithm) => this.askedLately(algorithm, now));
    this.save(policy, state, now, before ? { before } : {});
    return now;
  }

  /**
   * Moves the slots a concurrency request holds to `to` (see renewConcurrency): its isolate renews
   * them while the request is in flight, so only a vanished isolate's slots run out `slotTtl` after
   * their last renewal. `from`: where they were last known to be, and where renewals whose answers
   * never came may have moved them. Returns `to`, or 0 when they are held at none of these times
   * (expired, or given back), or for another algorithm.
   */
  renew(policy: Policy, units: number, from: number[], to: number): number {
    const now = Date.now();
    const state = stateFor(this.stored, policy, now);
    if (policy.algorithm !== "concurrency" || state?.algorithm !== "concurrency") return 0;
    const renewed = renewConcurrency(policy, state, units, from, to, now);
    if (!renewed) return 0;
    if (renewed.state !== state) this.keep(policy, state, renewed.state, now);
    return renewed.renewedAt;
  }

  /** The key's standing now, consuming nothing. */
  peek(policy: Policy): Decision {
    const now = Date.now();
    const blockedUntil = blockEnd(policy, this.block);
    if (now < blockedUntil) return blockedDecision(policy, stateFor(this.stored, policy, now), blockedUntil, now);
    // A concurrency rule's slots are its own requests in flight, as its decisions read them: a rate version's leases are no slots (see `countAllPins`).
    if (policy.algorithm === "concurrency") return peek(policy, stateFor(this.stored, policy, now), now);
    // A fast key is leased under the strictest policy a live isolate asked under: its standing is read as its isolates will find it.
    const under = this.peers.peers.size > 0 ? leasePolicy(policy, "", this.peers, now, this.recentStrict(now)) : policy;
    return standingWithPins(under, stateFor(this.stored, under, now), this.peers, now);
  }

  /** Forgets the key: its next request starts from a full quota. */
  async reset(): Promise<void> {
    this.stored = undefined;
    this.peers = indexPeers();
    this.block = { until: 0, since: 0 };
    this.alarmAt = null;
    this.tables.limiter = false;
    this.tables.peers = false;
    // deleteAll leaves the alarm: a forgotten key must not wake its object again.
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  /**
   * Deletes everything once the key is back to its full quota and no isolate has synced for a
   * minute (long enough for any retry to find its answer); otherwise looks again when that will be,
   * or within PEER_TTL_MS while it has more than PEERS_KEPT_TILL_DUE peers: a silent one is
   * forgotten at a look, and a daily or monthly key, due only at its next window's end, kept every
   * isolate it ever heard from until then.
   */
  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const now = Date.now();
    // A key that only ever leased has no state yet: its pins are counted under the policy they were
    // leased under. Pins are a rate's leases, never a concurrency rule's slots (see `countAllPins`):
    // settled there, a quiet rate isolate's lease held the slots a whole slotTtl.
    const rate = [this.stored, this.stored?.before].find((s) => s && s.policy.algorithm !== "concurrency");
    const policy = rate?.policy ?? [...this.peers.peers.values()].find((p) => p.under)?.under;
    const read = rate === this.stored ? this.stored?.state : policy && stateFor(this.stored, policy, now);
    // Pins settled are forgotten even when counting them changed nothing (their buckets had
    // passed): kept, they would count as taken until some isolate's next sync.
    const settled = policy ? settlePins(policy, read, this.peers, now) : undefined;
    if (policy && settled?.state) this.stored = fromBefore(this.stored, read) ? { ...this.stored!, before: { policy, state: settled.state } } : { policy, state: settled.state, ...this.keptFor(policy) };
    const recovered = recoveredAt(this.stored, now);
    // An alarm comes about once a minute, so it may walk the peers.
    const lastSync = Math.max(0, ...[...this.peers.peers.values()].map((p) => p.seenAt));
    const due = Math.max(recovered, lastSync + RETRY_WINDOW_MS, lastPinEnds(this.peers.peers) ?? 0, this.block.until);
    // Deleted at once, what was just settled is not written first.
    if (due <= now) return this.reset();
    if (settled && settled.before.size > 0) {
      this.writePeers([...settled.before.keys()]);
      this.write();
    }
    this.forgetSilentPeers(now);
    this.schedule(this.peers.peers.size > PEERS_KEPT_TILL_DUE ? Math.min(due, now + PEER_TTL_MS) : due);
  }

  /** The policy strict decisions asked under lately, if any: leases are granted under it too when it is stricter. */
  private recentStrict(now: number): Policy[] {
    return this.strictAsked && this.strictAsked.at >= now - PEER_TTL_MS ? [this.strictAsked.policy] : [];
  }

  /**
   * Keeps the strictest policy strict decisions asked under within PEER_TTL_MS, for {@link sync}'s
   * leases. Not a concurrency rule's: its limit is slots in flight, not a rate, and leased under it
   * a rate version's isolate got `limit` units a slotTtl, each pinned as a slot nothing gives back.
   */
  private heardStrict(policy: Policy, now: number): void {
    if (policy.algorithm === "concurrency") return;
    const last = this.strictAsked;
    if (!last || last.at < now - PEER_TTL_MS || !stricter(last.policy, policy)) this.strictAsked = { policy, at: now };
  }

  /**
   * A key whose rule turned from fast to strict: its isolates' outstanding leases are counted as
   * spent now, since strict decisions do not look at pins. Their late reports are then ignored.
   * Not by a concurrency rule, whose slots are requests in flight: a rate version's leases, counted
   * as slots, were held a whole slotTtl with nothing to give them back. They stay pinned, counted
   * as their isolates report them.
   */
  private countAllPins(policy: Policy, now: number): void {
    if (this.peers.holders === 0 || policy.algorithm === "concurrency") return;
    const settled = settlePins(policy, stateFor(this.stored, policy, now), this.peers, now, true);
    if (settled.state) this.stored = { policy, state: settled.state, ...this.keptFor(policy) };
    this.writePeers([...settled.before.keys()]);
    this.write();
  }

  /** Whether to keep `state`, carried over from the stored one (see `keepsCarried`). */
  private keepsCarried(state: LimiterState | undefined, now: number): boolean {
    return keepsCarried(this.stored, state, this.stored !== undefined && this.askedLately(this.stored.policy.algorithm, now));
  }

  /** Whether a live Worker version asks under `algorithm`: one did within PEER_TTL_MS. */
  private askedLately(algorithm: string, now: number): boolean {
    return (this.algorithmsAsked.get(algorithm) ?? Number.NEGATIVE_INFINITY) >= now - PEER_TTL_MS;
  }

  /**
   * What a state stored under `policy` by a sync or a settling of pins keeps from before: a
   * concurrency rule's slots (keptBefore keeps nothing else here), which count no units, so that
   * counting units does not forget them.
   */
  private keptFor(policy: Policy): Pick<Stored, "before"> {
    const slots = keptBefore(this.stored, policy, 0, Date.now(), () => false);
    return slots ? { before: slots } : {};
  }

  /** Stores `state`, changed from `read`, where `read` was found: in the state kept from before (see Stored's `before`), or as the key's. */
  private keep(policy: Policy, read: LimiterState | undefined, state: LimiterState, now: number): void {
    if (!fromBefore(this.stored, read)) return this.save(policy, state, now);
    this.stored = { ...this.stored!, before: { policy, state } };
    this.write();
  }

  /** Stores `state` under `policy`; `kept`: its flags, by default the state kept from before as it was (see Stored's `before`). */
  private save(policy: Policy, state: LimiterState, now: number, kept: Pick<Stored, "carried" | "before"> = this.stored?.before ? { before: this.stored.before } : {}): void {
    this.stored = { policy, state, ...kept };
    this.write();
    if (this.alarmAt === null) this.schedule(peek(policy, state, now).resetAt);
  }

  private forgetSilentPeers(now: number): void {
    const silent = [...this.peers.peers].filter(([, p]) => !isLive(p, now)).map(([id]) => id);
    for (const id of silent) removePeer(this.peers, id);
    this.writePeers(silent);
  }

  /** Writes the state as the object's own row: one statement per change, whatever the number of peers. */
  private write(): void {
    this.ensureTable("limiter");
    const row: Row = {
      ...(this.stored ? { stored: this.stored } : {}),
      ...(this.block.until > 0 ? { blockedUntil: this.block.until, blockedSince: this.block.since } : {}),
    };
    this.ctx.storage.sql.exec(
      "INSERT INTO limiter (id, value) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value",
      JSON.stringify(row),
    );
  }

  /**
   * Writes the rows of the peers named, as they now are, or deletes those forgotten: a sync writes
   * its own isolate's row (and those whose pins it settled), so its cost does not grow with the
   * peers and no row nears SQLite's 2 MB limit however many isolates share the key.
   */
  private writePeers(ids: readonly string[]): void {
    if (ids.length === 0) return;
    const sql = this.ctx.storage.sql;
    for (const id of ids) {
      const peer = this.peers.peers.get(id);
      if (peer) {
        this.ensureTable("peers");
        sql.exec("INSERT INTO peers (id, value) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value", id, JSON.stringify(peer));
      } else if (this.tables.peers) {
        sql.exec("DELETE FROM peers WHERE id = ?", id);
      }
    }
  }

  /** Makes the table named, once: the first write to it. */
  private ensureTable(name: keyof typeof TABLES): void {
    if (this.tables[name]) return;
    this.ctx.storage.sql.exec(TABLES[name]);
    this.tables[name] = true;
  }

  /** Sets the alarm for `at`, later by this object's own spread (see `alarmSpread`). */
  private schedule(at: number): void {
    this.alarmAt = this.alarmFor(at);
    void this.ctx.storage.setAlarm(this.alarmAt);
  }

  /** When the alarm goes off if set for `at`. */
  private alarmFor(at: number): number {
    this.spreadMs ??= alarmSpread(this.ctx.id.toString());
    // An alarm that comes early looks again; one past what the runtime takes (2189) was refused, and the key never forgotten.
    return Math.min(at, Date.now() + MAX_ALARM_AHEAD_MS) + this.spreadMs;
  }
}
