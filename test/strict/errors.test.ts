// Object errors on the strict path, as Cloudflare marks them: `.overloaded` backs off at once, `.retryable` is not retried for a decide.
import { env } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { Policy } from "../../src/algorithms";
import { objectErrorKind } from "../../src/durable-object/errors";
import type { Env } from "../../src/env";
import { metrics } from "../../src/metrics/metrics";
import { decide } from "../../src/limiter";
import { decideStrict } from "../../src/strict";
import type { ErrorMark, MarkedLimiter } from "../fixtures/main";
import { delayedSyncs } from "../helpers/namespace";
import { rule } from "../helpers/rules";

const marked = (env as unknown as { MARKED: DurableObjectNamespace<MarkedLimiter> }).MARKED;
const namespace = marked as unknown as Env["LIMITER"];
const decideCalls = () => metrics.value("floodgate_durable_object_calls_total", { method: "decide" });

/** The named object's next `failures` decides throw an error marked `mark`; then it answers. */
async function failing(objectName: string, failures: number, mark: ErrorMark): Promise<void> {
  await marked.get(marked.idFromName(objectName)).failWith(failures, mark);
}

describe("objectErrorKind", () => {
  it("reads Cloudflare's marks, overloaded first", () => {
    expect(objectErrorKind(Object.assign(new Error("x"), { overloaded: true }))).toBe("overloaded");
    expect(objectErrorKind(Object.assign(new Error("x"), { retryable: true }))).toBe("retryable");
    expect(objectErrorKind(Object.assign(new Error("x"), { retryable: true, overloaded: true }))).toBe("overloaded");
  });

  it("calls anything else other", () => {
    expect(objectErrorKind(new Error("x"))).toBe("other");
    expect(objectErrorKind(Object.assign(new Error("x"), { retryable: false }))).toBe("other");
    expect(objectErrorKind("x")).toBe("other");
    expect(objectErrorKind(undefined)).toBe("other");
  });

  it("sees the marks on an error thrown by a Durable Object, across RPC", async () => {
    await failing("marks/rpc", 1, "overloaded");
    const error = await marked.get(marked.idFromName("marks/rpc")).decide({ algorithm: "fixed-window", limit: 1, periodMs: 1_000, burst: 1, buckets: 1 }, [1]).catch((e: unknown) => e);
    expect(objectErrorKind(error)).toBe("overloaded");
  });
});

describe("a strict decision when the object errs", () => {
  it("leaves an overloaded object alone at once: the next request is decided by onError without a call", async () => {
    const overloaded = rule({ name: "overloaded-once", timeoutMs: 10_000 });
    await failing("overloaded-once/k", 1, "overloaded");
    const before = decideCalls();
    await expect(decideStrict(namespace, "overloaded-once/k", overloaded, 1, undefined)).rejects.toMatchObject({ overloaded: true });
    await expect(decideStrict(namespace, "overloaded-once/k", overloaded, 1, undefined)).rejects.toThrow(/unavailable/);
    expect(decideCalls() - before).toBe(1);
  });

  it("sends no further batch to an overloaded object: requests queued behind the failed call fail with it", async () => {
    const overloaded = rule({ name: "overloaded-queue", timeoutMs: 10_000 });
    await failing("overloaded-queue/k", 1, "overloaded");
    const before = decideCalls();
    const background: Promise<unknown>[] = [];
    const waitUntil = (promise: Promise<unknown>) => void background.push(promise);
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => decideStrict(namespace, "overloaded-queue/k", overloaded, 1, waitUntil)));
    await Promise.all(background);
    expect(outcomes.map((o) => o.status)).toEqual(Array(10).fill("rejected"));
    expect(decideCalls() - before).toBe(1);
  });

  it("does not retry a retryable decide, which may have been applied, and does not back off after one", async () => {
    const retryable = rule({ name: "retryable-once", timeoutMs: 10_000 });
    await failing("retryable-once/k", 1, "retryable");
    const before = decideCalls();
    await expect(decideStrict(namespace, "retryable-once/k", retryable, 1, undefined)).rejects.toMatchObject({ retryable: true });
    expect(decideCalls() - before).toBe(1);
    expect((await decideStrict(namespace, "retryable-once/k", retryable, 1, undefined)).decision.allowed).toBe(true);
  });

  it("counts a retryable failure that several queued requests rode as one failure, and does not back off after it", async () => {
    const retryable = rule({ name: "retryable-batch", timeoutMs: 10_000 });
    const name = "retryable-batch/k";
    let calls = 0;
    // The first call is answered, then the object's next decide fails: the batch queued behind the first call rides that one failed call.
    const armed = {
      idFromName: (objectName: string) => marked.idFromName(objectName),
      get: (id: DurableObjectId) =>
        new Proxy(marked.get(id), {
          get: (stub, prop) =>
            prop === "decide"
              ? async (policy: Policy, costs: number[]) => {
                  const decided = await stub.decide(policy, costs);
                  if (calls++ === 0) await failing(name, 1, "retryable");
                  return decided;
                }
              : Reflect.get(stub, prop),
        }),
    } as unknown as Env["LIMITER"];
    const background: Promise<unknown>[] = [];
    const waitUntil = (promise: Promise<unknown>) => void background.push(promise);
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => decideStrict(armed, name, retryable, 1, waitUntil)));
    await Promise.all(background);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expect((await decideStrict(armed, name, retryable, 1, undefined)).decision.allowed).toBe(true);
  });
});

/** The error lines `during` tried to write, by their kind: those written, and those the log's cap left out. */
async function errorLines(during: () => Promise<unknown>): Promise<{ written: Record<string, unknown>[]; attempted: number }> {
  const written: Record<string, unknown>[] = [];
  const dropped = () => metrics.value("floodgate_log_lines_dropped_total", { event: "error" });
  const before = dropped();
  const spy = vi.spyOn(console, "error").mockImplementation((line: unknown) => void written.push(JSON.parse(String(line)) as Record<string, unknown>));
  try {
    await during();
  } finally {
    spy.mockRestore();
  }
  return { written, attempted: written.length + dropped() - before };
}

describe("an object's failure in the log", () => {
  it("names the rule it was for, so an operator with many rules can tell whose objects fail", async () => {
    await failing("log/rule", 1, "overloaded");
    const lines: unknown[] = [];
    const spy = vi.spyOn(console, "error").mockImplementation((line: unknown) => void lines.push(line));
    try {
      await decide({ rule: rule({ name: "logged-rule", limit: 5 }), objectName: "log/rule", key: "k", cost: 1 }, { namespace });
    } finally {
      spy.mockRestore();
    }
    expect(lines.map((line) => JSON.parse(String(line)))).toContainEqual(expect.objectContaining({ event: "error", kind: "durable_object", rule: "logged-rule" }));
  });

  it("writes a failed call as one line however many requests rode it, and counts each request onError answered", async () => {
    const batched = rule({ name: "logged-batch", timeoutMs: 10_000, onError: "deny" });
    // The first request calls alone, the other seven ride the next call: both fail.
    await failing("logged-batch/k", 2, "retryable");
    const errorsBefore = metrics.value("floodgate_errors_total", { kind: "durable_object" });
    const background: Promise<unknown>[] = [];
    const context = { namespace, waitUntil: (promise: Promise<unknown>) => void background.push(promise) };
    const { attempted } = await errorLines(async () => {
      const decided = await Promise.all(Array.from({ length: 8 }, () => decide({ rule: batched, objectName: "logged-batch/k", key: "k", cost: 1 }, context)));
      await Promise.all(background);
      expect(decided.map((d) => d.decision.reason)).toEqual(Array(8).fill("error"));
    });
    expect(attempted).toBe(2);
    expect(metrics.value("floodgate_errors_total", { kind: "durable_object" }) - errorsBefore).toBe(8);
  });

  it("writes no line for each request an open breaker turns away, which the breaker's own line tells of, and counts each", async () => {
    const guarded = rule({ name: "logged-breaker", timeoutMs: 10_000, onError: "deny" });
    await failing("logged-breaker/k", 1, "overloaded");
    const errorsBefore = metrics.value("floodgate_errors_total", { kind: "durable_object" });
    const { written, attempted } = await errorLines(async () => {
      for (let i = 0; i < 6; i++) await decide({ rule: guarded, objectName: "logged-breaker/k", key: "k", cost: 1 }, { namespace });
    });
    expect(attempted).toBe(1);
    expect(written[0]).toMatchObject({ kind: "durable_object", rule: "logged-breaker", message: "injected: overloaded" });
    expect(metrics.value("floodgate_errors_total", { kind: "durable_object" }) - errorsBefore).toBe(6);
  });
  it("writes no line for each request a fast key's backoff turns away, after the line of the failure that started it", async () => {
    const fast = rule({ name: "logged-backoff", mode: "fast", timeoutMs: 10_000, onError: "deny" });
    const down = delayedSyncs(() => Promise.reject(new Error("injected: sync down")));
    const background: Promise<unknown>[] = [];
    const context = { namespace: down, waitUntil: (promise: Promise<unknown>) => void background.push(promise.catch(() => undefined)) };
    const { written, attempted } = await errorLines(async () => {
      for (let i = 0; i < 6; i++) await decide({ rule: fast, objectName: "logged-backoff/k", key: "k", cost: 1 }, context);
      await Promise.all(background);
    });
    expect(attempted).toBe(1);
    expect(written[0]).toMatchObject({ kind: "durable_object", rule: "logged-backoff", message: "injected: sync down" });
  });
});
