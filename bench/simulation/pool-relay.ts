/**
 * PROTOTYPE, simulator only (nothing in src/ does this): a location's or a continent's relay that
 * holds a lease for its isolates, as gubernator's GLOBAL behaviour does, instead of forwarding each
 * sync. It is one peer of the key's object and syncs as an isolate does, with floodgate's own
 * src/fast/local.ts on its own LocalKey; it answers its isolates' syncs from the units it holds,
 * carving each a sub-lease out of one of its lots, and reports upward, against that lot, what they
 * spent.
 */
import type { Rule } from "../../src/config/types";
import { demandRate, QUIET_GAPS, QUIET_UNTIL_INTERVALS, type Lease, type SyncRequest } from "../../src/fast/lease";
import { applyLease, freshKey, nextSync, syncFailed, type LocalKey } from "../../src/fast/local";
import { expireLots, leaseLeft } from "../../src/fast/lots";
import { syncDue } from "../../src/fast/sync-timing";
import type { Clock } from "./clock";
import { ObjectThread, SERVICE, threadStats, type Call, type Reply, type Served } from "./object";
import type { RelayStats } from "./relay";

/** Sends the relay's own sync to the key's object; `onReply` runs back at the relay. */
export type SendSync = (request: SyncRequest, onReply: (reply: Reply) => void) => void;

/** Units a member (an isolate) holds from one of the relay's lots. */
interface Grant {
  lot: number;
  units: number;
}

/** What the relay remembers of one of its isolates. */
interface Member {
  /** the highest sync seq whose reports were counted, and its answer once given */
  seq: number;
  answer: Lease | undefined;
  /** sub-leases by the seq that asked for them (the isolate reports against it) */
  grants: Map<number, Grant>;
  seenAt: number;
  /** counted among the active members (see `peers`) */
  active: boolean;
  /** its demand rate as read from its last sync (`demandRate`) */
  rated?: { rate: number; basis: number };
}

interface Waiting {
  member: Member;
  request: SyncRequest;
  reply(reply: Reply): void;
}

/** A member seen within this long counts toward the peers the relay reports (for onError's local share). */
const MEMBER_ACTIVE_MS = 10_000;

/**
 * How long the key's object makes a pooled relay's lease, and every pin it holds, last at least
 * (bench/simulation/object.ts `lastLonger`): long enough that a sub-lease can outlast its isolate's
 * next call as a quiet isolate's lease does, as it must not outlast the lot it comes from. With the
 * relay's lots ending at its booked call, sub-leases lasted about a second, and 38–41 % of requests
 * at 1× waited.
 */
export const POOL_LEASE_MS = 10_000;

/** The soonest a relay with nothing to spare books an isolate's next call (see `refilledAt`). */
const DRY_RETRY_MS = 100;

export class PoolRelayObject extends ObjectThread<RelayStats> {
  private readonly key: LocalKey;
  private readonly members = new Map<string, Member>();
  /** members seen within MEMBER_ACTIVE_MS, and every sighting in time order, from which they fall out: counting by a walk of every member took a third of a 4,096-isolate run */
  private active = 0;
  private readonly sightings: { member: Member; at: number }[] = [];
  private sightingsHead = 0;
  private waiting: Waiting[] = [];
  private inflight = false;
  private timer = false;
  private gone = false;
  private seq = 0;

  constructor(
    clock: Clock,
    steadyFrom: number,
    /** the key's rule: the relay syncs at its interval, as its isolates do */
    private readonly rule: Rule,
    private readonly id: string,
    private readonly sendSync: SendSync,
  ) {
    super(clock, { ...threadStats(), batches: 0, forwarded: 0, refused: 0, timedOut: 0 }, steadyFrom);
    this.key = freshKey(clock.now);
  }

  /** The relay restarts: what it holds is lost (the key's object counts it spent once its lots end), and every sync waiting here fails. */
  reset(): void {
    this.gone = true;
    const lost: Reply = { ok: false, error: "reset" };
    this.drain(lost);
    for (const w of this.waiting) w.reply(lost);
    this.waiting = [];
  }

  protected override serve(call: Call | "alarm"): Served {
    const { relay, reply } = call as Call;
    const request = relay!.forwarded.request;
    const now = this.clock.now;
    this.stats.forwarded++;
    let member = this.members.get(request.isolate);
    if (!member) this.members.set(request.isolate, (member = { seq: 0, answer: undefined, grants: new Map(), seenAt: now, active: false }));
    this.see(member, now);
    // A resent sync (the same seq) is answered as before, and its reports are not counted twice.
    if (request.seq <= member.seq && member.answer) return { reply: { ok: true, lease: member.answer }, serviceMs: SERVICE.baseMs };
    if (request.seq > member.seq) this.absorb(member, request);
    const lease = this.carve(member, request, now);
    if (lease) {
      this.pump(now);
      return { reply: { ok: true, lease }, serviceMs: SERVICE.baseMs };
    }
    this.waiting.push({ member, request, reply });
    this.syncUp(now);
    return { serviceMs: SERVICE.baseMs };
  }

  /** Counts what the isolate reports: spent units against the lot they came from, unspent ones back to it (or given back upward, once it has ended). */
  private absorb(member: Member, request: SyncRequest): void {
    member.seq = request.seq;
    member.answer = undefined;
    member.rated = demandRate(member.rated, request);
    this.key.demand += request.demand;
    for (const s of request.unleased ?? []) this.key.unleased.push({ ...s });
    for (const report of request.reports) {
      const grant = member.grants.get(report.lease);
      // A grant this relay never made (one of a relay before a restart): the key's object counts it spent.
      if (!grant) continue;
      const lot = this.key.lots.find((l) => l.lease === grant.lot);
      const spent = report.spent.reduce((a, s) => a + s.units, 0);
      if (lot) {
        lot.spent.push(...report.spent.map((s) => ({ ...s })));
        lot.units += report.unspent;
      } else {
        this.key.reports.push({ lease: grant.lot, spent: report.spent.map((s) => ({ ...s })), unspent: report.unspent });
      }
      grant.units -= spent + report.unspent;
      if (grant.units <= 0) member.grants.delete(report.lease);
    }
  }

  /**
   * A sub-lease for the isolate from the lot that lasts longest, or undefined when none can pay what
   * its requests need now. Sized and timed as the key's object leases an isolate (src/fast/lease.ts
   * `grantLease`): the isolate's demand read by `demandRate`, until its next call, one interval on,
   * has had half an interval to be answered, with a standard deviation more, topping up what it
   * holds; lasting until then, or for a quiet isolate seven of its mean gaps, up to ten intervals;
   * never past a lot the isolate holds units of (the relay's lots last POOL_LEASE_MS, renewed by each
   * of its syncs).
   */
  private carve(member: Member, request: SyncRequest, now: number): Lease | undefined {
    expireLots(this.key, now);
    const standing = this.key.standing;
    // Until the key's object has answered the relay, it knows nothing to answer with.
    if (standing === null) return undefined;
    const lot = this.key.lots.reduce<(typeof this.key.lots)[number] | undefined>((best, l) => (l.units > 0 && (!best || l.expiresAt > best.expiresAt) ? l : best), undefined);
    const denied = !standing.allowed && now < this.key.blockedUntil;
    const dry = !lot || lot.units < request.need;
    if (dry && !denied && !request.release) return undefined;
    const interval = request.horizonMs;
    const rate = member.rated?.rate ?? 0;
    const expected = rate * 1.5 * interval;
    const wanted = Math.max(request.need, Math.ceil(expected + Math.sqrt(expected) - (request.held ?? 0)));
    const units = dry || request.release ? 0 : Math.min(lot!.units, Math.max(0, wanted));
    if (units > 0) {
      lot!.units -= units;
      member.grants.set(request.seq, { lot: lot!.lease, units });
    }
    // Up to ten intervals from now, as grantLease's `quietCap` for a call one interval on.
    const quiet = rate > 0 ? Math.min(QUIET_GAPS / rate, (QUIET_UNTIL_INTERVALS - 1) * interval) : 0;
    let expiresAt = now + interval + Math.max(interval / 2, quiet);
    // The isolate renews what it holds to end with this (`topsUp`): no unit outlives its lot here.
    const held = new Set([...member.grants.values()].map((g) => g.lot));
    for (const id of held) expiresAt = Math.min(expiresAt, this.key.lots.find((l) => l.lease === id)?.expiresAt ?? now);
    const pool = leaseLeft(this.key);
    return this.answer(member, request, { seq: request.seq, units, expiresAt, standing: { ...standing, remaining: standing.remaining + pool }, peers: this.peers(now), nextSyncAt: dry && this.key.saturated ? this.refilledAt(now) : now + interval, saturated: this.key.saturated, topsUp: true });
  }

  /**
   * When a relay with nothing to spare expects units again: its own booked call answered (a round
   * trip after it, as the last took), not sooner than DRY_RETRY_MS from now. An isolate turned away
   * dry is booked for then rather than an interval on: at 10× the prototype's waits fell from
   * 0.36–2.1 % to 0.05–0.53 % (0.05–0.61 % once the simulator placed continents by distance).
   */
  private refilledAt(now: number): number {
    return Math.max(now + DRY_RETRY_MS, this.key.nextSyncAt + this.key.roundTripMs);
  }

  private answer(member: Member, request: SyncRequest, lease: Lease): Lease {
    member.seq = request.seq;
    member.answer = lease;
    return lease;
  }

  /** The key's object's peers (relays) times the isolates this relay stands for. */
  private peers(now: number): number {
    const sightings = this.sightings;
    while (this.sightingsHead < sightings.length && sightings[this.sightingsHead]!.at < now - MEMBER_ACTIVE_MS) {
      const { member, at } = sightings[this.sightingsHead++]!;
      // Its last sighting is out of the window: it was seen no later.
      if (member.active && member.seenAt === at) {
        member.active = false;
        this.active--;
      }
    }
    if (this.sightingsHead > 4096 && this.sightingsHead * 2 > sightings.length) {
      sightings.splice(0, this.sightingsHead);
      this.sightingsHead = 0;
    }
    return Math.max(1, this.key.peers) * Math.max(1, this.active);
  }

  private see(member: Member, now: number): void {
    member.seenAt = now;
    this.sightings.push({ member, at: now });
    if (member.active) return;
    member.active = true;
    this.active++;
  }

  /** Syncs upward when the relay's booked call has come or its units run low, or sets the timer for its booked call. */
  private pump(now: number): void {
    if (syncDue(this.key, this.rule, now)) return this.syncUp(now);
    // Nothing booked ahead: the next sync of one of its isolates pumps again.
    if (this.timer || this.inflight || this.key.nextSyncAt <= now) return;
    this.timer = true;
    this.clock.at(this.key.nextSyncAt, () => {
      this.timer = false;
      if (!this.gone) this.pump(this.clock.now);
    });
  }

  /** One sync of the relay's own with the key's object, asking for what the syncs waiting here need; they are answered from its grant. */
  private syncUp(now: number): void {
    if (this.inflight || this.gone) return;
    this.inflight = true;
    this.stats.batches++;
    const need = this.waiting.reduce((a, w) => a + w.request.need, 0);
    const request = nextSync(this.key, this.rule, { isolate: this.id, nextSeq: () => ++this.seq }, need, now);
    let over = false;
    const settle = (reply: Reply): void => {
      if (over || this.gone) return;
      over = true;
      this.inflight = false;
      const at = this.clock.now;
      if (reply.ok) applyLease(this.key, this.rule, reply.lease!, at);
      else syncFailed(this.key, this.rule, at);
      const waiting = this.waiting;
      this.waiting = [];
      for (const w of waiting) {
        const lease = reply.ok ? this.carve(w.member, w.request, at) : undefined;
        // Units the grant could not cover are not waited for again: the isolate hears the standing and asks anew.
        w.reply(lease ? { ok: true, lease } : reply.ok ? { ok: true, lease: this.answer(w.member, w.request, { seq: w.request.seq, units: 0, expiresAt: at, standing: this.key.standing!, peers: this.peers(at), nextSyncAt: at + w.request.horizonMs, saturated: this.key.saturated }) } : reply);
      }
      this.pump(at);
    };
    this.sendSync(request, settle);
    this.clock.after(this.rule.timeoutMs, () => {
      if (over) return;
      this.stats.timedOut++;
      settle({ ok: false, error: "timeout" });
    });
  }
}
