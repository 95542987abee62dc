/** Circuit breakers: after failed calls in a row, a key's object (or every object of a rule) is left alone for a while, and onError decides at once. */

import { log } from "../metrics/log";

/**
 * A request turned away while its object's breaker, or its rule's, is open (or a fast key backs off):
 * onError answers it and it is counted as the object's error, but the breaker's line, or the failure
 * that started the backoff, tells of it, not one line per request.
 */
export class BreakerOpenError extends Error {
  override readonly name = "BreakerOpenError";
}

/** The longest an object is left alone, however often it has failed. */
export const MAX_BACKOFF_MS = 30_000;

/** How long to leave an object alone after `failures` failed calls in a row: `baseMs`, doubling each time. */
export function backoffMs(baseMs: number, failures: number): number {
  return Math.min(baseMs * 2 ** (failures - 1), MAX_BACKOFF_MS);
}

/** A strict decision waits for the object; one failure may be a blip (the object moved, say), two in a row are not. */
const FAILURES_TO_OPEN = 2;

interface Breaker {
  failures: number;
  retryAt: number;
  /** the error of the last failure counted: the requests of one batch fail with their call's one error, which is one failure */
  cause?: unknown;
}

/**
 * The breakers of one isolate, by object name. A closed breaker lets calls through; after
 * {@link FAILURES_TO_OPEN} failures in a row (or one that says the object is overloaded) it opens
 * for {@link backoffMs} of the rule's timeout, then lets the next call through to try again: a
 * success closes it, a failure opens it for twice as long. Only failing objects are tracked, at most
 * `maxObjects` of them.
 *
 * @example
 * const breakers = new Breakers();
 * if (breakers.waitFor(name, now) > 0) return onError();
 */
export class Breakers {
  private readonly failing = new Map<string, Breaker>();

  constructor(private readonly maxObjects = 10_000) {}

  /** ms until the named object may be called again; 0 when it may be called now. */
  waitFor(name: string, now: number): number {
    const breaker = this.failing.get(name);
    return breaker && breaker.retryAt > now ? breaker.retryAt - now : 0;
  }

  /** Counts a failed call; `cause`, its error, counts once however many requests rode the call. */
  failed(name: string, baseMs: number, now: number, cause?: unknown): void {
    this.count(name, baseMs, now, FAILURES_TO_OPEN, cause);
  }

  /** An overloaded object is left alone at once: a second call to confirm it would add to the overload. */
  overloaded(name: string, baseMs: number, now: number): void {
    this.count(name, baseMs, now, 1);
  }

  private count(name: string, baseMs: number, now: number, failuresToOpen: number, cause?: unknown): void {
    let breaker = this.failing.get(name);
    if (!breaker) {
      if (this.failing.size >= this.maxObjects) this.failing.clear();
      this.failing.set(name, (breaker = { failures: 0, retryAt: 0 }));
    }
    // Requests that were already waiting when it opened fail together: they are one failure, not many.
    if (breaker.retryAt > now) return;
    // A batch's requests share its call's error: one blip under load is still one failure, not one per request.
    if (cause !== undefined && cause === breaker.cause) return;
    breaker.cause = cause;
    breaker.failures++;
    if (breaker.failures < failuresToOpen) return;
    const backoff = backoffMs(baseMs, breaker.failures - failuresToOpen + 1);
    breaker.retryAt = now + backoff;
    log.event("breaker", { scope: "key", rule: ruleOf(name), state: "open", failures: breaker.failures, retryInMs: backoff }, now);
  }

  succeeded(name: string, now: number): void {
    const breaker = this.failing.get(name);
    if (!breaker) return;
    this.failing.delete(name);
    if (breaker.failures >= FAILURES_TO_OPEN) log.event("breaker", { scope: "key", rule: ruleOf(name), state: "closed" }, now);
  }
}

/** Different keys of one rule whose calls fail in a row, with no success for the rule between, before all its keys are left alone. */
const KEYS_TO_OPEN_RULE = 4;

/**
 * One rule's breaker over all its objects. Per-object breakers take two failures for each key, so
 * when the objects themselves are down a rule with thousands of active keys would still make
 * thousands of requests wait out a timeout. Once {@link KEYS_TO_OPEN_RULE} different keys have
 * failed with no success for the rule between, every key is left alone for {@link backoffMs} of
 * the timeout; the first call after that is the probe: a failure reopens it for twice as long, a
 * success for any key closes it. A success between failures keeps it closed, so one broken key
 * among healthy ones never trips it.
 *
 * @example
 * const breaker = ruleBreaker(rule.name, namespaceTag(namespace));
 * if (breaker.waitFor(now) > 0) return onError();
 */
export class RuleBreaker {
  private readonly failing = new Set<string>();
  private opened = 0;
  private retryAt = 0;

  constructor(private readonly rule: string) {}

  /** ms until the rule's objects may be called again; 0 when they may be called now. */
  waitFor(now: number): number {
    return this.retryAt > now ? this.retryAt - now : 0;
  }

  failed(name: string, baseMs: number, now: number): void {
    // Calls that were already waiting when it opened fail together, as for one object.
    if (this.retryAt > now) return;
    if (this.failing.size < KEYS_TO_OPEN_RULE) this.failing.add(name);
    if (this.failing.size < KEYS_TO_OPEN_RULE) return;
    this.opened++;
    this.retryAt = now + backoffMs(baseMs, this.opened);
    log.event("breaker", { scope: "rule", rule: this.rule, state: "open", retryInMs: this.retryAt - now }, now);
  }

  succeeded(now: number): void {
    if (this.failing.size === 0) return;
    if (this.opened > 0) log.event("breaker", { scope: "rule", rule: this.rule, state: "closed" }, now);
    this.failing.clear();
    this.opened = 0;
    this.retryAt = 0;
  }
}

const ruleBreakers = new Map<string, RuleBreaker>();

/**
 * This isolate's breaker for the rule named `name` over its objects in the namespace `tag` names
 * (`namespaceTag`), strict and fast alike: another namespace's objects of the rule (a
 * jurisdiction's, another binding's) fail apart, and their failures left these alone too. Rules
 * and namespaces are few, so all are kept.
 */
export function ruleBreaker(name: string, tag: string): RuleBreaker {
  const tagged = tag + name;
  let breaker = ruleBreakers.get(tagged);
  if (!breaker) ruleBreakers.set(tagged, (breaker = new RuleBreaker(name)));
  return breaker;
}

/** The rule of an object's tracked name `[<namespace tag>]<rule>/<key>` (see `trackedName`): logs name the rule, never the key. */
function ruleOf(tracked: string): string {
  const slash = tracked.indexOf("/");
  return tracked.slice(tracked.lastIndexOf("\n", slash) + 1, slash);
}
