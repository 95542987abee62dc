/**
 * One isolate in fast mode. Every decision about a key is floodgate's own src/fast/local.ts
 * (`freshKey`, `decideLocally`, `fromLease`, `nextSync`, `applyLease`, `syncFailed`,
 * `admittedUnleased` and `surrender`) and src/fast/sync-timing.ts (`syncDue`, `onTimeCallAt`,
 * `callOnTime`, `releasable`) on a real `LocalKey`; the shell around them, which in
 * src/fast/index.ts awaits the object with promises, timers and `Date.now()`, is mirrored here on
 * the simulated clock, each part naming the function of index.ts it mirrors. A rule with `aggregate` syncs through its location's or its continent's relay
 * (`relayFor`, src/fast/relay.ts), as index.ts does.
 */
import type { Decision } from "../../src/algorithms";
import { policyOf } from "../../src/config/policy";
import type { Rule } from "../../src/config/types";
import { admittedUnleased, applyLease, decideLocally, freshKey, fromLease, hasPending, knownShare, nextSync, surrender, syncFailed, type LocalKey, type Sender } from "../../src/fast/local";
import { callOnTime, onTimeCallAt, releasable, syncDue, type OnTimeChain } from "../../src/fast/sync-timing";
import type { SyncRequest } from "../../src/fast/lease";
import { firstThroughRelay, relayFor, syncsThrough } from "../../src/fast/relay";
import { DEFAULT_MAX_KEYS, LruTable } from "../../src/fast/table";
import { RuleBreaker } from "../../src/strict/breaker";
import { IsolateBase, type Done, type Link, type Outcome, type WaitCause } from "./isolate";
import type { RunTotals } from "./metrics";
import type { CallKind, Reply } from "./object";

type SyncError = Extract<NonNullable<Outcome["error"]>, "timeout" | "overloaded" | "queueFull" | "reset">;

/** A sync in flight for one key, and the requests waiting for it (index.ts's `run` promise). */
interface Flight {
  waiters: ((ok: boolean, error?: SyncError) => void)[];
  /** index.ts Entry's `late`: a request gave up on this sync, which counted as one failure */
  late?: true;
}

/** One request's wait on its object across decideFast's two passes: whether it is answered, and the sync it waits on now. */
interface Run {
  settled: boolean;
  flight: Flight | null;
}

/** What onError is answering for when a sync failed: a relay's full queue, its batch's timeout, or an overloaded object. */
function syncError(reply: Extract<Reply, { ok: false }>): SyncError {
  return reply.error === "full" ? "queueFull" : reply.error === "timeout" || reply.error === "reset" ? reply.error : "overloaded";
}

/** index.ts `Entry`; `synced` and `inflightCause` are only for the report: an isolate's first call from the others, and what a request that joins the sync in flight waits behind. */
interface Entry {
  rule: Rule;
  objectName: string;
  key: LocalKey;
  inflight: Flight | null;
  inflightSince: number;
  inflightCause: WaitCause;
  /** the costs of the requests waiting for a sync (index.ts's `waiting`) */
  waiting: number[];
  synced: boolean;
  /** index.ts Entry's `evicted`: pushed out of the table, what it holds goes back (`letGo`) */
  evicted?: boolean;
}

export class FastIsolate extends IsolateBase {
  private readonly sender: Sender;
  private readonly table: LruTable<Entry>;
  private evicted: Entry[] = [];
  /** index.ts's `leaving`: evicted keys whose release is not answered yet, taken up again if they come back */
  private readonly leaving = new LruTable<Entry>(DEFAULT_MAX_KEYS, () => undefined);
  private lastSweep = 0;
  /** index.ts's `ruleBreaker(rule.name)`: module state, so one per isolate (one rule per scenario) */
  private readonly breaker = new RuleBreaker("sim");
  /** index.ts's `rulePeers` for the one rule: the most isolates an object reported to this one */
  private rulePeers = 0;
  /** index.ts's `ruleColdSince` for the one rule: when onError was first asked before any object answered */
  private coldSince: number | undefined;

  constructor(
    id: string,
    location: string,
    continent: string,
    rttMs: number,
    link: Link,
    private readonly totals?: RunTotals,
  ) {
    super(id, location, continent, rttMs, link);
    let seq = 0;
    this.sender = { isolate: id, nextSeq: () => ++seq };
    this.table = new LruTable<Entry>(DEFAULT_MAX_KEYS, (name, entry) => {
      entry.evicted = true;
      if (!hasPending(entry.key)) return;
      this.evicted.push(entry);
      this.leaving.set(name, entry);
    });
  }

  /** index.ts `decideFast`. */
  request(rule: Rule, objectName: string, cost: number, done: Done): void {
    const now = this.link.clock.now;
    const entry = this.entryFor(rule, objectName, now);
    this.flushEvicted();
    this.sweep(now);
    // Units in leases that have ended, before deciding expires them: the report's `expired`.
    const ended = entry.key.lots.reduce((sum, lot) => sum + (lot.expiresAt <= now ? lot.units : 0), 0);
    const local = this.decideHere(entry, rule, cost, now);
    if (local) return done({ decision: local, waited: false });
    const wait = Math.max(entry.key.retryAt - now, this.breaker.waitFor(now));
    if (wait > 0) return done({ decision: this.onErrorCounted(entry, cost, now), waited: false, error: "unavailable" });
    const cause = this.waitCause(entry, ended > 0, now);
    entry.waiting.push(cost);
    this.attempt(entry, rule, cost, 0, now + rule.timeoutMs, cause, done);
  }

  /** Why a request that found no units waits (see WaitCause), read before it starts or joins a sync. */
  private waitCause(entry: Entry, ended: boolean, now: number): WaitCause {
    if (!entry.synced) return "first";
    if (ended) return "expired";
    if (entry.inflight) return entry.inflightCause;
    return now < entry.key.nextSyncAt ? "spentBeforeBooked" : "spentAfterBooked";
  }

  /**
   * One pass of decideFast's loop: wait for a sync, then try the lease again; both passes within the
   * decision's one deadline, whose timer the first pass sets (the clock's deadlines come in time
   * order) and `run` carries to the second.
   */
  private attempt(entry: Entry, rule: Rule, cost: number, attempt: number, deadline: number, cause: WaitCause, done: Done, run: Run = { settled: false, flight: null }): void {
    const clock = this.link.clock;
    const finish = (decision: Decision, error?: SyncError): void => {
      run.settled = true;
      entry.waiting.splice(entry.waiting.indexOf(cost), 1);
      // decideFast's `finally`.
      this.letGo(entry);
      done({ decision: this.alive ? decision : null, waited: true, cause, ...(error ? { error } : {}) });
    };
    // Lines 105–106: requests queued behind the same syncs spent their grants first.
    const comeBack = (now: number) =>
      finish({ allowed: false, limit: rule.limit, remaining: 0, resetAt: now + rule.syncMs, moreAt: now + rule.syncMs, retryAfter: rule.syncMs, reason: "limit" });
    // The deadline passed while the first sync did not cover the request: a TimeoutError, which onError answers.
    if (attempt > 0 && deadline <= clock.now) return finish(this.onErrorCounted(entry, cost, clock.now), "timeout");
    const flight = this.sync(entry, cost, false, "waiting");
    run.flight = flight;
    flight.waiters.push((ok, error) => {
      if (run.settled || !this.alive) return;
      const now = clock.now;
      if (!ok) return finish(this.onErrorCounted(entry, cost, now), error ?? "overloaded");
      const decided = fromLease(entry.key, rule, cost, now);
      if (decided) return finish(decided.allowed || decided.reason === "blocked" ? decided : { ...decided, reason: "limit" });
      if (attempt === 0) return this.attempt(entry, rule, cost, 1, deadline, cause, done, run);
      comeBack(now);
    });
    if (attempt > 0) return;
    // withTimeout (src/strict/timeout.ts): the request gives up; the sync itself goes on. A request
    // whose isolate vanished meanwhile ends here too, lost (finish reports no decision for it).
    clock.deadline(deadline, () => {
      if (run.settled) return;
      const late = run.flight!;
      // index.ts `syncLate`: a sync the request gave up on backs the key off as a failed one does, once.
      if (!late.late && entry.inflight === late) {
        late.late = true;
        if (syncFailed(entry.key, rule, clock.now)) this.breaker.failed(entry.objectName, rule.timeoutMs, clock.now);
      }
      finish(this.onErrorCounted(entry, cost, clock.now), "timeout");
    });
  }

  /** src/limiter/index.ts `decide`'s catch with index.ts `shareOf` and `ruleColdSince`: onError decides, and what it admits the next sync reports (`admittedWithoutLease`). */
  private onErrorCounted(entry: Entry, cost: number, now: number): Decision {
    if (this.rulePeers === 0) this.coldSince ??= now;
    const decision = this.onError(entry.rule, entry.objectName, cost, knownShare(entry.key, this.rulePeers, now - (this.coldSince ?? now)), now);
    if (decision.allowed) admittedUnleased(entry.key, entry.rule, cost, now);
    return decision;
  }

  /** index.ts `decideHere`. */
  private decideHere(entry: Entry, rule: Rule, cost: number, now: number): Decision | undefined {
    const local = decideLocally(entry.key, rule, cost, now);
    if (!local) return undefined;
    if (syncDue(entry.key, rule, now)) this.sync(entry, 0, false, "background");
    return local;
  }

  /** index.ts `entryFor`; the rule never changes here. */
  private entryFor(rule: Rule, objectName: string, now: number): Entry {
    const known = this.table.get(objectName) ?? this.takenBack(objectName);
    if (known) return known;
    const entry: Entry = { rule, objectName, key: freshKey(now, firstThroughRelay(rule)), inflight: null, inflightSince: 0, inflightCause: "first", waiting: [], synced: false };
    this.table.set(objectName, entry);
    return entry;
  }

  /**
   * index.ts `sync`: one sync per key in flight, joined by whoever needs it; the
   * request is built on the next microtask, and goes to the key's object or, for a rule that
   * aggregates, to its location's or continent's relay; `retriedOnce` tries once more
   * after a relay's restart, the one error here Cloudflare marks retryable; `rulePeers` is
   * kept per isolate. `kind` is only for the report.
   */
  private sync(entry: Entry, need: number, release: boolean, kind: CallKind, chain: OnTimeChain = { since: this.link.clock.now, calls: 0 }): Flight {
    const clock = this.link.clock;
    const now = clock.now;
    if (entry.inflight && now - entry.inflightSince <= 2 * entry.rule.timeoutMs) return entry.inflight;
    const flight: Flight = { waiters: [] };
    entry.inflight = flight;
    entry.inflightSince = now;
    // A timer's call (`chain.calls` > 0) is the booked call made on time, a round trip before it.
    const booked = now >= entry.key.nextSyncAt || chain.calls > 0;
    entry.inflightCause = !entry.synced ? "first" : kind === "waiting" ? "behindWait" : kind === "release" ? "behindRelease" : booked ? "behindBookedCall" : "behindTopUp";
    clock.soon(() => {
      if (!this.alive) return;
      const waiting = entry.waiting.reduce((sum, units) => sum + units, 0);
      const built = nextSync(entry.key, entry.rule, this.sender, Math.max(need, waiting), clock.now, release, entry.waiting.reduce((most, units) => Math.max(most, units), need));
      this.calls++;
      const why: CallKind = entry.synced ? kind : "first";
      entry.synced = true;
      this.totals?.callKind(why);
      const { rule, objectName } = entry;
      const via = relayFor(syncsThrough(rule.aggregate, entry.key.relayed), this, objectName);
      const payload = via ? { relay: { objectName, forwarded: { policy: policyOf(rule), request: built }, timeoutMs: rule.timeoutMs }, kind: why } : { sync: built, kind: why };
      const call = (attempt: number): void =>
        this.link.call(this, via ?? objectName, payload, (reply) => {
          // retriedOnce: an error Cloudflare marks retryable, here a relay's restart, is tried once more.
          if (!reply.ok && reply.error === "reset" && attempt === 0) return call(1);
          settle(reply);
        });
      const settle = (reply: Reply): void => {
        const at = clock.now;
        if (reply.ok) {
          applyLease(entry.key, entry.rule, reply.lease!, at);
          if (!release) this.callWhenBooked(entry, built, at, chain);
          this.rulePeers = Math.max(this.rulePeers, reply.lease!.peers);
          this.breaker.succeeded(at);
        } else if (!flight.late && syncFailed(entry.key, entry.rule, at)) {
          // index.ts `failed`.
          this.breaker.failed(entry.objectName, entry.rule.timeoutMs, at);
        }
        if (entry.inflight === flight) entry.inflight = null;
        // index.ts: not after an answer to another seq, which leaves the sync unanswered.
        if (entry.key.outbox === null) this.letGo(entry);
        for (const waiter of flight.waiters) waiter(reply.ok, reply.ok ? undefined : syncError(reply));
      };
      call(0);
    });
    return flight;
  }

  /** index.ts `callWhenBooked`: the timer that makes the key's booked call if no request came to make it, on the simulated clock. */
  private callWhenBooked(entry: Entry, sent: SyncRequest, answeredAt: number, chain: OnTimeChain): void {
    const at = onTimeCallAt(entry.key, entry.rule, sent, chain, answeredAt);
    if (at === undefined) return;
    this.link.clock.at(at, () => {
      if (!this.alive || this.table.peek(entry.objectName)?.key !== entry.key || entry.inflight || !callOnTime(entry.key, answeredAt, this.link.clock.now)) return;
      this.sync(entry, 0, false, "background", { since: chain.since, calls: chain.calls + 1 });
    });
  }

  /** index.ts `flushEvicted`. */
  private flushEvicted(): void {
    if (this.evicted.length === 0) return;
    const batch = this.evicted;
    this.evicted = [];
    for (const entry of batch) this.letGo(entry);
  }

  /** index.ts `letGo`. */
  private letGo(entry: Entry): void {
    if (!entry.evicted || entry.inflight || entry.waiting.length > 0) return;
    if (hasPending(entry.key)) {
      surrender(entry.key);
      this.sync(entry, 0, true, "release");
    } else if (this.leaving.peek(entry.objectName) === entry) {
      this.leaving.delete(entry.objectName);
    }
  }

  /** index.ts `takenBack`. */
  private takenBack(objectName: string): Entry | undefined {
    const entry = this.leaving.peek(objectName);
    if (!entry) return undefined;
    this.leaving.delete(objectName);
    entry.evicted = false;
    this.table.set(objectName, entry);
    return entry;
  }

  /** index.ts `sweep`. */
  private sweep(now: number): void {
    if (now - this.lastSweep < 1_000) return;
    this.lastSweep = now;
    let budget = 32;
    for (const entry of this.table.values()) {
      if (budget === 0) break;
      if (entry.inflight || !releasable(entry.key, entry.rule, now)) continue;
      budget--;
      this.sync(entry, 0, true, "release");
    }
  }
}
