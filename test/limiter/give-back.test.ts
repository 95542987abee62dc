// Units given back on a request's own path (a hold refused past the caller's deadline, a client gone while held), at an object slow to take them: within the rule's timeout.
import { describe, expect, it } from "vitest";
import { metrics } from "../../src/metrics/metrics";
import { limitKey, type LimiterContext } from "../../src/limiter";
import { limitWithin } from "../../src/limiter/wait";
import { delayedCalls } from "../helpers/namespace";
import { rule } from "../helpers/rules";

const SLOW_REFUND_MS = 3_000;
/** What a loaded 2-core test machine may add to a timeout. */
const MARGIN_MS = 500;

/** Refunds on their way to the object: a test waits them out, so no timer outlives it. */
const landing: Promise<unknown>[] = [];

/** The real objects, each refund answered only after SLOW_REFUND_MS (then applied): an object far behind on its queue. */
const slowRefunds = delayedCalls("refund", () => new Promise((resolve) => setTimeout(resolve, SLOW_REFUND_MS)), (refund) => void landing.push(refund));

/**
 * A gcra rule of one unit a second with three of tolerance, every request past the first held until it conforms. Its
 * timeout is well short of SLOW_REFUND_MS, yet long enough that the decisions themselves are the object's on a loaded
 * machine: past 100 ms, onError decided the held request, and an onError admission has nothing to give back.
 */
const held = (name: string) => rule({ name, algorithm: "gcra", limit: 1, periodMs: 1_000, burst: 3, delay: 0, timeoutMs: 1_000 });

describe("units given back on the request's path", () => {
  it("answers blockUntilReady's refused hold within the rule's timeout, though the object is slow to take the units back", async () => {
    const smooth = held("give-back-deadline");
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace: slowRefunds, waitUntil: (promise) => void background.push(promise) };
    await limitKey(context, smooth, "k", 1);
    const errors = metrics.value("floodgate_errors_total", { kind: "refund" });
    const started = Date.now();
    const refused = await limitWithin(context, smooth, "k", 1, 10);
    const took = Date.now() - started;
    await Promise.all([...background, ...landing]);
    expect(refused.decision).toMatchObject({ allowed: false, reason: "limit" });
    expect(took).toBeLessThan(smooth.timeoutMs + MARGIN_MS);
    expect(metrics.value("floodgate_errors_total", { kind: "refund" })).toBe(errors + 1);
  });

  it("rejects a held request whose client left within the rule's timeout, though the object is slow to take the units back", async () => {
    const smooth = held("give-back-abort");
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace: slowRefunds, waitUntil: (promise) => void background.push(promise) };
    await limitKey(context, smooth, "k", 1);
    const controller = new AbortController();
    const waiting = limitKey(context, smooth, "k", 1, controller.signal);
    setTimeout(() => controller.abort(new Error("client left")), 50);
    const started = Date.now();
    await expect(waiting).rejects.toThrow("client left");
    const took = Date.now() - started;
    await Promise.all([...background, ...landing]);
    expect(took).toBeLessThan(smooth.timeoutMs + MARGIN_MS);
  });
});
