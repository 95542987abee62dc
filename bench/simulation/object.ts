/**
 * A Durable Object's thread (one call at a time from a bounded queue), and one key's object on it,
 * whose calls run floodgate's own lease and algorithm code exactly as
 * src/durable-object/rate-limiter.ts runs it. That class extends `DurableObject` from
 * `cloudflare:workers`, which Node cannot load, so the bodies of its `sync`, `syncAll`, `decide` and
 * `alarm` are mirrored here in a few lines each, calling the same functions in the same order.
 */
import { createHash } from "node:crypto";
import { peek, type Policy } from "../../src/algorithms";
import { decideBatch, type Decided } from "../../src/algorithms/block";
import { recoveredAt, stateFor, type Stored } from "../../src/algorithms/kept";
import { grantLease, type Lease, type SyncRequest } from "../../src/fast/lease";
import { RelayBook, type Forwarded, type Relayed } from "../../src/fast/relay";
import { alarmSpread, RETRY_WINDOW_MS } from "../../src/durable-object/alarm";
import { isLive, lastPinEnds, PEER_TTL_MS, PEERS_KEPT_TILL_DUE, type Peer } from "../../src/fast/peer";
import { indexPeers, leasePolicy, putPeer, removePeer, settlePins, type PeerIndex } from "../../src/fast/peer-index";
import type { Clock } from "./clock";

/**
 * What a call costs the object's thread. Cloudflare gives one object a soft limit of about 1,000
 * requests a second ("How much work can a single Durable Object do?", Durable Objects limits and
 * FAQ): 1 ms a call. A sync writes only its own isolate's peer row (rate-limiter.ts `writePeers`)
 * and reads the peers' figures from their index (src/fast/peer-index.ts), not by walking them:
 * `leasePolicy` and `grantLease` measured 9.0 µs a sync at 512 peers and 8.9 µs at 4,096 in Node
 * (a walk of every peer took 104 µs and 852 µs), well inside the 1 ms. An alarm, about once a
 * minute, still walks the peers for the last sync, the last pin's end and the silent ones:
 * 0.14 ms at 512 peers and 0.96 ms at 4,096, about 0.23 µs a peer. A strict batch decides each cost
 * in turn: 10 µs a decision, generous beside the pure decision's measured cost (bench/RESULTS.md,
 * Decision cost). A relay's `syncAll` applies each of its syncs as `sync` does, and writes each
 * one's peer row: 50 µs a sync (an assumption: the lease code's 9 µs and a SQLite row write, which
 * the 1 ms of a lone sync covers).
 */
export const SERVICE = { baseMs: 1, alarmPerPeerMs: 0.00023, perDecisionMs: 0.01, perSyncMs: 0.05 } as const;

/**
 * When the object refuses a call as Cloudflare's "Durable Object is overloaded" does. Its documented
 * causes are too many requests queued and requests queued too long, with no published figures:
 * assumed here, a call finds 1,000 calls already waiting, or a wait of more than 5 s ahead of it.
 */
export const OVERLOAD = { maxQueued: 1_000, maxWaitMs: 5_000 } as const;


/**
 * An answer, or a refusal: "overloaded" as Cloudflare's, "expired" only from the deadline
 * PROTOTYPE; from a relay, "full" (its queue refused the sync), "timeout" (its batch outlived
 * the batch's timeout) and "reset" (it restarted with the sync waiting there: Cloudflare marks
 * such an error retryable).
 */
export type Reply = { ok: true; lease?: Lease; relayed?: Relayed; decided?: Decided[] } | { ok: false; error: "overloaded" | "expired" | "full" | "timeout" | "reset" };

/**
 * Why a fast isolate called: its first sync for the key, a request its lease could not pay for
 * (waiting on the answer), a background sync `syncDue` asked for, or a release (sweep or eviction).
 */
export type CallKind = "first" | "waiting" | "background" | "release";
export const CALL_KINDS: readonly CallKind[] = ["first", "waiting", "background", "release"];

/**
 * One call as it reaches an object: a fast-mode sync, a relay's batch of them (`syncAll`), an
 * isolate's sync for a relay to forward (`relay`) or a strict batch, and where its answer goes.
 */
export interface Call {
  sync?: SyncRequest;
  batch?: Forwarded[];
  /** the relay that sent `batch` (rate-limiter.ts `syncAll`'s `relay`) */
  relayId?: string;
  /** rate-limiter.ts `relay`'s arguments */
  relay?: { objectName: string; forwarded: Forwarded; timeoutMs: number };
  /** a fast sync's reason */
  kind?: CallKind;
  costs?: number[];
  /** when its caller gives up waiting (sent at + the rule's timeout) */
  deadline?: number;
  /** PROTOTYPE (bench/simulation/pool-relay.ts): a pooled relay's sync, whose lease and pins last at least this long */
  lastsMs?: number;
  /** called when the object has answered (or refused), at that time; the caller adds the way back */
  reply(reply: Reply): void;
}

/** What the report reads from any object's thread. */
export interface ThreadStats {
  arrived: number;
  served: number;
  overloaded: number;
  busyMs: number;
  maxQueued: number;
  /** calls arriving in the busiest second, and in the busiest second after the warm-up */
  peakPerSecond: number;
  steadyPeakPerSecond: number;
  /** the fast syncs of the busiest second after the warm-up, by why they were made */
  steadyPeakKinds: Record<CallKind, number>;
}

/** What the report reads from a key's object. */
export interface ObjectStats extends ThreadStats {
  expired: number;
  maxPeers: number;
  /** the largest peer row and the largest key row (stored state) sampled, bytes of JSON as rate-limiter.ts writes them; 0 when not sampled */
  maxPeerRowBytes: number;
  maxKeyRowBytes: number;
}

/** What a call did on the thread: its answer when the thread is done with it (none: an alarm, or an answer that comes later), and what it cost. */
export interface Served {
  reply?: Reply;
  serviceMs: number;
}

/**
 * One Durable Object's thread: it serves one call at a time, each costing what `serve` says; calls
 * beyond it wait in a queue, and one that finds the queue too long is refused as overloaded.
 */
export abstract class ObjectThread<S extends ThreadStats> {
  private readonly queue: (Call | "alarm")[] = [];
  private queueHead = 0;
  private busy = false;
  private lastServiceMs: number = SERVICE.baseMs;
  private second = -1;
  private inSecond = 0;
  private inSecondKinds: Record<CallKind, number> = noKinds();

  constructor(
    protected readonly clock: Clock,
    readonly stats: S,
    /** seconds starting at or after this count toward the steady-state peak */
    private readonly steadyFrom: number,
  ) {}

  /** A call arrives now: queued, served at once, or refused as overloaded. */
  receive(call: Call): void {
    const now = this.clock.now;
    this.stats.arrived++;
    const second = Math.floor(now / 1000);
    if (second !== this.second) {
      this.second = second;
      this.inSecond = 0;
      this.inSecondKinds = noKinds();
    }
    if (call.kind) this.inSecondKinds[call.kind]++;
    this.stats.peakPerSecond = Math.max(this.stats.peakPerSecond, ++this.inSecond);
    if (now >= this.steadyFrom && this.inSecond > this.stats.steadyPeakPerSecond) {
      this.stats.steadyPeakPerSecond = this.inSecond;
      this.stats.steadyPeakKinds = { ...this.inSecondKinds };
    }
    const queued = this.queue.length - this.queueHead;
    if (queued >= OVERLOAD.maxQueued || queued * this.lastServiceMs > OVERLOAD.maxWaitMs) {
      this.stats.overloaded++;
      call.reply({ ok: false, error: "overloaded" });
      return;
    }
    this.queue.push(call);
    this.stats.maxQueued = Math.max(this.stats.maxQueued, queued + 1);
    if (!this.busy) this.serveNext();
  }

  /** The object restarts: every call waiting on its thread is answered `reply` at once, and the queue is empty. */
  protected drain(reply: Reply): void {
    for (const call of this.queue.slice(this.queueHead)) if (call !== "alarm") call.reply(reply);
    this.queue.length = 0;
    this.queueHead = 0;
  }

  /** What one call does, run when the thread takes it up. */
  protected abstract serve(call: Call | "alarm", now: number): Served;

  /** The alarm runs on the object's thread like any call: it waits in the queue, but is never refused. */
  protected enqueueAlarm(): void {
    this.queue.push("alarm");
    if (!this.busy) this.serveNext();
  }

  private serveNext(): void {
    if (this.queueHead >= this.queue.length) {
      this.busy = false;
      this.queue.length = 0;
      this.queueHead = 0;
      return;
    }
    this.busy = true;
    const call = this.queue[this.queueHead++]!;
    const { reply, serviceMs } = this.serve(call, this.clock.now);
    this.lastServiceMs = serviceMs;
    this.stats.busyMs += serviceMs;
    this.clock.after(serviceMs, () => {
      this.stats.served++;
      if (call !== "alarm" && reply) call.reply(reply);
      this.serveNext();
    });
  }
}

/** How one object behaves beyond floodgate's own code: what the report samples, and the deadline prototype's switch. */
export interface ObjectOptions {
  /** sample the rows' sizes every this many ms (0: never): JSON of every peer row is slow to make */
  rowSampleMs: number;
  /** seconds starting at or after this count toward the steady-state peak */
  steadyFrom: number;
  /** PROTOTYPE: a call whose caller has already given up (past its deadline) is answered at once, undone */
  dropExpired: boolean;
}

/** What answering an expired call costs the PROTOTYPE object: a comparison, no storage. */
const EXPIRED_MS = 0.05;

/** One key's object: floodgate's lease and algorithm code on an object's thread. */
export class KeyObject extends ObjectThread<ObjectStats> {
  private stored: Stored | undefined;
  private peers: PeerIndex = indexPeers();
  /** a rule with `block`: every request is denied until then */
  private blockedUntil = 0;
  private cursor = Number.NEGATIVE_INFINITY;
  private alarmAt: number | null = null;
  private nextRowSample = 0;
  /** each peer row's JSON length, by the row: a row is replaced, never changed, so one unchanged since the last sample is not made again */
  private readonly rowBytes = new WeakMap<Peer, number>();
  private readonly relays = new RelayBook();

  /** rate-limiter.ts `schedule`'s spread, drawn from a hash of the object's name, as workerd's id is */
  private readonly spreadMs: number;

  constructor(
    clock: Clock,
    private readonly policy: Policy,
    private readonly options: ObjectOptions = { rowSampleMs: 0, steadyFrom: 0, dropExpired: false },
    name = "",
  ) {
    super(clock, { ...threadStats(), expired: 0, maxPeers: 0, maxPeerRowBytes: 0, maxKeyRowBytes: 0 }, options.steadyFrom);
    this.spreadMs = alarmSpread(createHash("sha256").update(name).digest("hex"));
  }

  protected override serve(call: Call | "alarm", now: number): Served {
    let reply: Reply | undefined;
    let serviceMs: number = SERVICE.baseMs;
    if (call !== "alarm" && this.options.dropExpired && call.deadline !== undefined && now >= call.deadline) {
      this.stats.expired++;
      reply = { ok: false, error: "expired" };
      serviceMs = EXPIRED_MS;
    } else if (call === "alarm") {
      serviceMs += SERVICE.alarmPerPeerMs * this.peers.peers.size;
      this.alarm(now);
    } else if (call.sync) {
      reply = { ok: true, lease: this.sync(this.policy, call.sync, now, call.lastsMs) };
      this.samplePeers(now);
    } else if (call.batch) {
      reply = { ok: true, relayed: this.syncAll(call.relayId!, call.batch, now) };
      serviceMs += SERVICE.perSyncMs * call.batch.length;
      this.samplePeers(now);
    } else {
      const costs = call.costs ?? [];
      reply = { ok: true, decided: this.decide(this.policy, costs, now) };
      serviceMs += SERVICE.perDecisionMs * costs.length;
    }
    return { reply, serviceMs };
  }

  /**
   * rate-limiter.ts `syncAll`: each sync applied as `sync` applies it, in order, and
   * the relay told its gap by floodgate's own `RelayBook`.
   * Every policy here is the one rule's, which this version reads, so none fails alone.
   */
  private syncAll(relay: string, batch: Forwarded[], now: number): Relayed {
    return { answers: batch.map(({ policy, request }) => this.sync(policy, request, now)), gapMs: this.relays.heard(relay, now) };
  }

  /**
   * rate-limiter.ts `sync`, with the clock passed in; the rows it writes are not
   * modelled (see SERVICE). No strict decision shares a key with fast syncs here, so no strict
   * policy is recent (`strictAsked`), and every isolate asks under the one rule's policy.
   */
  private sync(policy: Policy, request: SyncRequest, now: number, lastsMs?: number): Lease {
    const under = leasePolicy(policy, request.isolate, this.peers, now, []);
    const stored = stateFor(this.stored, under, now);
    const granted = grantLease(under, stored, this.peers, request, now, this.blockedUntil, this.cursor, policy);
    const { state, blockedUntil, cursor, changed } = granted;
    const lease = lastsMs === undefined || changed.length === 0 ? granted.lease : this.lastLonger(request.isolate, granted.lease, now + lastsMs, now);
    if (changed.length === 0) return lease;
    this.cursor = cursor;
    this.blockedUntil = blockedUntil;
    if (state && state !== stored) this.stored = { policy: under, state };
    if (this.alarmAt === null || (this.peers.peers.size > PEERS_KEPT_TILL_DUE && this.alarmAt > now + RETRY_WINDOW_MS + this.spreadMs)) this.setAlarm(now + RETRY_WINDOW_MS);
    return lease;
  }

  /**
   * PROTOTYPE, not rate-limiter.ts: a pooled relay's lease, and every pin it holds, last until `until`
   * at least, so that the sub-leases it carves can outlast its booked call as a quiet isolate's lease
   * does; its pins are held (and, unreported, counted spent) that much longer if it vanishes.
   */
  private lastLonger(isolate: string, lease: Lease, until: number, now: number): Lease {
    if (lease.expiresAt >= until) return lease;
    const longer = { ...lease, expiresAt: until };
    const peer = this.peers.peers.get(isolate)!;
    putPeer(this.peers, isolate, { ...peer, lease: longer, pins: peer.pins.map((p) => (p.until < until ? { ...p, until } : p)) }, now);
    return longer;
  }

  /** rate-limiter.ts `decide` (its batch is `decideBatch`, called here too). Strict scenarios lease nothing, so `countAllPins` has no pins to count and is left out, and no fast sync shares their key, so `heardStrict` has no lease to shape; with one rule version, no state is kept for a carry-over or a raised slot TTL (`keepsCarried`, `ttlRaised`). */
  private decide(policy: Policy, costs: number[], now: number): Decided[] {
    const blockedBefore = this.blockedUntil;
    const { state, blockedUntil, results } = decideBatch(policy, stateFor(this.stored, policy, now), blockedBefore, costs, now);
    this.blockedUntil = blockedUntil;
    if (state && (results.some((r) => r.decision.allowed) || blockedUntil !== blockedBefore)) {
      this.stored = { policy, state };
      if (this.alarmAt === null) this.setAlarm(peek(policy, state, now).resetAt);
    }
    return results;
  }

  /** rate-limiter.ts `alarm` and `forgetSilentPeers`; `reset` forgets everything. */
  private alarm(now: number): void {
    this.alarmAt = null;
    const policy = this.stored?.policy ?? [...this.peers.peers.values()].find((p) => p.under)?.under;
    if (policy) {
      const settled = settlePins(policy, this.stored?.state, this.peers, now);
      if (settled.before.size > 0 && settled.state) this.stored = { policy, state: settled.state };
    }
    const recovered = recoveredAt(this.stored, now);
    let lastSync = 0;
    for (const p of this.peers.peers.values()) lastSync = Math.max(lastSync, p.seenAt);
    const due = Math.max(recovered, lastSync + RETRY_WINDOW_MS, lastPinEnds(this.peers.peers) ?? 0, this.blockedUntil);
    if (due <= now) {
      this.stored = undefined;
      this.peers = indexPeers();
      this.blockedUntil = 0;
      return;
    }
    for (const [id, peer] of this.peers.peers) if (!isLive(peer, now)) removePeer(this.peers, id);
    this.setAlarm(this.peers.peers.size > PEERS_KEPT_TILL_DUE ? Math.min(due, now + PEER_TTL_MS) : due);
  }

  private setAlarm(due: number): void {
    const at = due + this.spreadMs;
    this.alarmAt = at;
    this.clock.at(at, () => {
      if (this.alarmAt === at) this.enqueueAlarm();
    });
  }

  private samplePeers(now: number): void {
    this.stats.maxPeers = Math.max(this.stats.maxPeers, this.peers.peers.size);
    if (this.options.rowSampleMs <= 0 || now < this.nextRowSample) return;
    this.nextRowSample = now + this.options.rowSampleMs;
    // The rows as rate-limiter.ts writes them: the key's own (`write`) and one per peer (`writePeers`).
    const row = { ...(this.stored ? { stored: this.stored } : {}), ...(this.blockedUntil > 0 ? { blockedUntil: this.blockedUntil } : {}) };
    this.stats.maxKeyRowBytes = Math.max(this.stats.maxKeyRowBytes, JSON.stringify(row).length);
    for (const peer of this.peers.peers.values()) {
      let bytes = this.rowBytes.get(peer);
      if (bytes === undefined) this.rowBytes.set(peer, (bytes = JSON.stringify(peer).length));
      this.stats.maxPeerRowBytes = Math.max(this.stats.maxPeerRowBytes, bytes);
    }
  }

  /** Peers the object holds now. */
  get peerCount(): number {
    return this.peers.peers.size;
  }
}

function noKinds(): Record<CallKind, number> {
  return { first: 0, waiting: 0, background: 0, release: 0 };
}

/** A thread's counters before its first call. */
export function threadStats(): ThreadStats {
  return { arrived: 0, served: 0, overloaded: 0, busyMs: 0, maxQueued: 0, peakPerSecond: 0, steadyPeakPerSecond: 0, steadyPeakKinds: noKinds() };
}
