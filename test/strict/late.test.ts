// A strict decision that reaches the object after its request stopped waiting (the rule's timeout): what it took there must not outlive the request.
import { describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/env";
import { decide, giveBack, type Ask, type LimiterContext } from "../../src/limiter";
import { delayedCalls } from "../helpers/namespace";
import { rule } from "../helpers/rules";

/** The real objects, each decide applied only after `delayMs` when `slow`: an object far behind on its queue. */
function slowDecides(delayMs: number): { namespace: Env["LIMITER"]; slow: { on: boolean } } {
  const slow = { on: true };
  const namespace = delayedCalls("decide", () => (slow.on ? new Promise((resolve) => setTimeout(resolve, delayMs)) : Promise.resolve()));
  return { namespace, slow };
}

/** Another key's object answers first: the rule's first failure here is no cold start, which onError local refuses. */
async function answeredBefore(ask: Ask, context: LimiterContext, slow: { on: boolean }): Promise<void> {
  slow.on = false;
  await decide({ ...ask, key: "warm", objectName: `${ask.rule.name}/warm` }, context);
  slow.on = true;
}

describe("a strict decision that comes after its request stopped waiting", () => {
  it.each(["deny", "local"] as const)(
    "leaves no concurrency slot taken at the object by a request onError %s answered, once it is over",
    async (onError) => {
      const name = `late-slot-${onError}`;
      const { namespace, slow } = slowDecides(300);
      const background: Promise<unknown>[] = [];
      const context: LimiterContext = { namespace, waitUntil: (promise) => void background.push(promise) };
      const ask: Ask = { rule: rule({ name, algorithm: "concurrency", limit: 1, periodMs: 60_000, burst: 1, timeoutMs: 100, onError }), key: "k", objectName: `${name}/k`, cost: 1 };
      await answeredBefore(ask, context, slow);
      const first = await decide(ask, context);
      expect(first.decision).toMatchObject({ allowed: onError === "local", reason: "error" });
      // The request is over (a denial has nothing to give back; an admission releases its slot), and the late decide has landed.
      await giveBack(ask, first, context);
      await Promise.all(background);
      slow.on = false;
      const next = await decide(ask, context);
      await Promise.all(background);
      expect(next.decision).toMatchObject({ allowed: true });
    },
  );

  it.each(["deny", "local"] as const)("gives back the units of a request onError %s refused (local's: at a cold start), once its late decide lands: the refusal took nothing", async (onError) => {
    const name = `late-units-${onError}`;
    const { namespace, slow } = slowDecides(300);
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace, waitUntil: (promise) => void background.push(promise) };
    const ask: Ask = { rule: rule({ name, algorithm: "fixed-window", limit: 1, periodMs: 3_600_000, burst: 1, timeoutMs: 100, onError }), key: "k", objectName: `${name}/k`, cost: 1 };
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: false, reason: "error" });
    await Promise.all(background);
    slow.on = false;
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: true });
    await Promise.all(background);
  });

  it("leaves no concurrency slot taken by a request decided alone (no waitUntil to batch under) once its late decide lands", async () => {
    const name = "late-slot-alone";
    const slow = { on: true };
    // The late decide and the refund it brings, each 300 ms late, as they land: nothing else waits for them.
    const landed: Promise<unknown>[] = [];
    const namespace = delayedCalls(["decide", "refund"], () => (slow.on ? new Promise((resolve) => setTimeout(resolve, 300)) : Promise.resolve()), (answer) => void landed.push(answer));
    const context: LimiterContext = { namespace };
    const ask: Ask = { rule: rule({ name, algorithm: "concurrency", limit: 1, periodMs: 60_000, burst: 1, timeoutMs: 100, onError: "deny" }), key: "k", objectName: `${name}/k`, cost: 1 };
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: false, reason: "error" });
    await vi.waitFor(() => expect(landed).toHaveLength(2), { timeout: 10_000, interval: 20 });
    await Promise.all(landed);
    slow.on = false;
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: true });
  });
});

describe("a strict decision that comes after onError admitted its request, which another rule then denied", () => {
  const fixedWindow = (name: string) => rule({ name, algorithm: "fixed-window", limit: 1, periodMs: 3_600_000, burst: 1, timeoutMs: 100, onError: "local" });

  it("gives back what the late decide took when it lands after the request gave its units back", async () => {
    const name = "late-given-back-first";
    const { namespace, slow } = slowDecides(300);
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace, waitUntil: (promise) => void background.push(promise) };
    const ask: Ask = { rule: fixedWindow(name), key: "k", objectName: `${name}/k`, cost: 1 };
    await answeredBefore(ask, context, slow);
    const first = await decide(ask, context);
    expect(first.decision).toMatchObject({ allowed: true, reason: "error" });
    await giveBack(ask, first, context);
    await Promise.all(background);
    slow.on = false;
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: true });
  });

  it("gives back what the late decide took when the request gives its units back after it landed", async () => {
    const name = "late-landed-first";
    const { namespace, slow } = slowDecides(300);
    const background: Promise<unknown>[] = [];
    const context: LimiterContext = { namespace, waitUntil: (promise) => void background.push(promise) };
    const ask: Ask = { rule: fixedWindow(name), key: "k", objectName: `${name}/k`, cost: 1 };
    await answeredBefore(ask, context, slow);
    const first = await decide(ask, context);
    expect(first.decision).toMatchObject({ allowed: true, reason: "error" });
    await Promise.all(background);
    await giveBack(ask, first, context);
    await Promise.all(background);
    slow.on = false;
    expect((await decide(ask, context)).decision).toMatchObject({ allowed: true });
  });
});
