/**
 * One isolate in strict mode: floodgate's own DenialCache, Breakers, RuleBreaker and LastAnswers
 * (src/strict/denials.ts, breaker.ts, last-answers.ts) around calls to the key's object, batched by floodgate's own
 * Lanes (src/strict/lanes.ts), as src/strict/coalescer.ts batches them (one call in flight per key
 * per isolate; requests that arrive meanwhile wait and go together in the next call, at most 128;
 * an overloaded object gets no next batch). The Coalescer's shell runs on promises, timers and
 * `Date.now()`, so it is mirrored here on the simulated clock. Which request's invocation sends a
 * batch (its newest) is not modelled: an isolate here has no invocations, and the hand-off costs
 * no simulated time.
 */
import type { Decided } from "../../src/algorithms/block";
import { policyOf } from "../../src/config/policy";
import type { Rule } from "../../src/config/types";
import { Breakers, RuleBreaker } from "../../src/strict/breaker";
import { DenialCache } from "../../src/strict/denials";
import { Lanes, laneOf } from "../../src/strict/lanes";
import { LastAnswers } from "../../src/strict/last-answers";
import { IsolateBase, type Done, type Link } from "./isolate";

interface Waiter {
  cost: number;
  settled: boolean;
  resolve(decided: Decided): void;
  reject(error: "timeout" | "overloaded"): void;
  lost(): void;
}

export class StrictIsolate extends IsolateBase {
  private readonly denials = new DenialCache();
  private readonly breakers = new Breakers();
  private readonly ruleBreaker = new RuleBreaker("sim");
  private readonly lanes = new Lanes<Waiter>();
  private readonly answers = new LastAnswers();

  constructor(
    id: string,
    location: string,
    continent: string,
    rttMs: number,
    link: Link,
    /** false: each request calls alone, as decideStrict does without a waitUntil */
    private readonly coalesce: boolean,
  ) {
    super(id, location, continent, rttMs, link);
  }

  /** src/strict/index.ts `decideStrict`, and src/limiter/index.ts `decide`'s onError on failure. */
  request(rule: Rule, objectName: string, cost: number, done: Done): void {
    const clock = this.link.clock;
    const now = clock.now;
    const policy = policyOf(rule);
    const cached = this.denials.lookup(objectName, cost, now, policy);
    if (cached) return done({ decision: cached, waited: false });
    const wait = Math.max(this.breakers.waitFor(objectName, now), this.ruleBreaker.waitFor(now));
    if (wait > 0) return done({ decision: this.onError(rule, objectName, cost, this.answers.shareOf(rule.name, policy, objectName, now), now), waited: false, error: "unavailable" });
    const waiter: Waiter = {
      cost,
      settled: false,
      resolve: (decided) => {
        const at = clock.now;
        this.breakers.succeeded(objectName, at);
        this.answers.heard(rule.name, policy, objectName, decided.decision, at);
        this.ruleBreaker.succeeded(at);
        if (decided.decision.allowed) this.denials.forget(objectName);
        else this.denials.remember(objectName, cost, decided.decision, at, policy);
        done({ decision: decided.decision, waited: true });
      },
      lost: () => done({ decision: null, waited: true }),
      reject: (error) => {
        const at = clock.now;
        if (error === "overloaded") this.breakers.overloaded(objectName, rule.timeoutMs, at);
        else this.breakers.failed(objectName, rule.timeoutMs, at);
        this.ruleBreaker.failed(objectName, rule.timeoutMs, at);
        done({ decision: this.onError(rule, objectName, cost, this.answers.shareOf(rule.name, policy, objectName, at), at), waited: true, error });
      },
    };
    // coalescer.ts's full queue and index.ts's catch: a full queue is answered by onError at once, and no breaker hears of it.
    if (!this.coalesce) return this.alone(rule, objectName, waiter);
    const lane = laneOf(objectName, policy);
    if (this.lanes.full(lane)) return done({ decision: this.onError(rule, objectName, cost, this.answers.shareOf(rule.name, policy, objectName, now), now), waited: false, error: "queueFull" });
    this.enqueue(rule, objectName, lane, waiter);
  }

  /** coalescer.ts `decide`: join the key's lane, and send a batch if none is in flight (or the one in flight stalled). */
  private enqueue(rule: Rule, objectName: string, lane: string, waiter: Waiter): void {
    const clock = this.link.clock;
    const batch = this.lanes.join(lane, waiter, clock.now, 2 * rule.timeoutMs);
    clock.deadline(clock.now + rule.timeoutMs, () => {
      if (waiter.settled) return;
      if (!this.alive) return this.lose(waiter);
      this.lanes.leave(lane, waiter);
      waiter.settled = true;
      waiter.reject("timeout");
    });
    if (batch) this.send(objectName, lane, batch);
  }

  /**
   * coalescer.ts `send`: one batch, then the next; a failed call fails its own batch,
   * and an overloaded object's queue with it. Every refusal here is the object's "overloaded".
   */
  private send(objectName: string, lane: string, batch: Waiter[]): void {
    this.calls++;
    this.link.call(this, objectName, { costs: batch.map((w) => w.cost) }, (reply) => {
      const { failed, next } = this.lanes.ended(lane, batch, !reply.ok, this.link.clock.now);
      [...batch, ...failed].forEach((waiter, i) => {
        if (waiter.settled) return;
        waiter.settled = true;
        if (reply.ok) waiter.resolve(reply.decided![i]!);
        else waiter.reject("overloaded");
      });
      if (next) this.send(objectName, lane, next);
    });
  }

  /** decideStrict without a waitUntil: one call per request, raced against the rule's timeout. */
  private alone(rule: Rule, objectName: string, waiter: Waiter): void {
    const clock = this.link.clock;
    this.calls++;
    this.link.call(this, objectName, { costs: [waiter.cost] }, (reply) => {
      if (waiter.settled) return;
      waiter.settled = true;
      if (reply.ok) waiter.resolve(reply.decided![0]!);
      else waiter.reject("overloaded");
    });
    clock.deadline(clock.now + rule.timeoutMs, () => {
      if (waiter.settled) return;
      if (!this.alive) return this.lose(waiter);
      waiter.settled = true;
      waiter.reject("timeout");
    });
  }

  /** A request whose isolate vanished while it waited: it ends with no decision. */
  private lose(waiter: Waiter): void {
    waiter.settled = true;
    waiter.lost();
  }
}
