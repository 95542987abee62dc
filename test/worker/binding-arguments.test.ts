// The service binding's arguments, its props and its results' functions: what is not understood is refused with a message, never ignored.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { Floodgate } from "../../src/binding/floodgate";
import type { Env } from "../../src/env";
import { originUrl } from "../helpers/worker";

function binding(rules: unknown, props?: unknown, bindings: Partial<Env> = {}): { floodgate: Floodgate; done: () => Promise<void> } {
  const ctx = Object.assign(createExecutionContext(), props === undefined ? {} : { props });
  const bound: Env = { ...(env as unknown as Env), ORIGIN_URL: originUrl(), RATE_LIMIT_RULES: JSON.stringify(rules), ...bindings };
  return { floodgate: new Floodgate(ctx as never, bound), done: () => waitOnExecutionContext(ctx) };
}

describe("the service binding's props", () => {
  it("takes props.rule as the rule of a call that names none", async () => {
    const { floodgate, done } = binding([{ name: "ba-a", limit: 2, period: "1m" }, { name: "ba-b", limit: 5, period: "1m" }], { rule: "ba-b" });
    expect(await floodgate.limit({ key: "k" })).toMatchObject({ rule: "ba-b", limit: 5 });
    await done();
  });

  it("refuses a prop it does not read, such as a cost, rather than charge the default", async () => {
    const { floodgate, done } = binding([{ name: "ba-props", limit: 9, period: "1m" }], { rule: "ba-props", cost: 5 });
    await expect(floodgate.limit({ key: "k" })).rejects.toThrow(/^limit: the binding's props\.cost is not something floodgate reads; its props take only "rule"/);
    await expect(floodgate.check(new Request("http://app.test/x"))).rejects.toThrow(/^check: the binding's props\.cost/);
    await done();
  });
});

describe("the floodgate Worker's own bindings", () => {
  it("rejects every call naming LIMITER when the RateLimiter binding is missing, rather than failing inside", async () => {
    const { floodgate, done } = binding([{ name: "ba-no-limiter", limit: 5, period: "1m" }], undefined, { LIMITER: undefined as never });
    const named = /^LIMITER: expected the RateLimiter Durable Object binding/;
    await expect(floodgate.limit({ key: "k" })).rejects.toThrow(named);
    await expect(floodgate.peek({ key: "k" })).rejects.toThrow(named);
    await expect(floodgate.reset({ key: "k" })).rejects.toThrow(named);
    await expect(floodgate.check(new Request("http://app.test/x"))).rejects.toThrow(named);
    await done();
  });
});

describe("the functions of a binding's result", () => {
  it("names NaN as NaN when settle is given it", async () => {
    const { floodgate, done } = binding([{ name: "ba-settle", limit: 3, period: "1m", count: "failed" }]);
    const result = await floodgate.limit({ key: "k" });
    await expect(result.settle!(Number.NaN)).rejects.toThrow(/got NaN$/);
    await done();
  });

  it("refuses arguments settle and charge do not take, as limit does; release ignores them, as a promise's then hands it one", async () => {
    const { floodgate, done } = binding([
      { name: "ba-count", limit: 3, period: "1m", count: "failed" },
      { name: "ba-slots", algorithm: "concurrency", limit: 3 },
    ]);
    const counted = await floodgate.limit({ rule: "ba-count", key: "k" });
    const held = await floodgate.limit({ rule: "ba-slots", key: "k" });
    await expect((counted.settle as (...a: unknown[]) => Promise<void>)(200, {}, 3)).rejects.toThrow(/^settle: takes the response's status or whether it succeeded, and its headers, got 3 arguments$/);
    await expect((counted.charge as (...a: unknown[]) => Promise<void>)(2, { cost: 5 })).rejects.toThrow(/^charge \("ba-count"\): takes a whole number of units, got 2 arguments$/);
    await (held.release as (...a: unknown[]) => Promise<void>)("ignored");
    await done();
  });
});
