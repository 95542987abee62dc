// A LIMITER namespace in front of the real one, whose calls of one method wait first: a slow object, or a slow path to it.
import { env } from "cloudflare:test";
import { onTestFinished } from "vitest";
import type { Env } from "../../src/env";
import type { RateLimiter } from "../../src/durable-object/rate-limiter";
import type { SyncRequest } from "../../src/fast/lease";

type Method = "decide" | "sync" | "refund" | "renew" | "peek" | "reset";

/**
 * The real objects, each call of `method` (or of each of several) made once `before(...its arguments)` settles; `seen` is
 * handed each call's answer, for a test to wait out what lands after it. A namespace as the library
 * checks one (a proxy of the real one), so `limiter` and `createGate` take it too.
 */
export function delayedCalls<M extends Method>(
  method: M | readonly M[],
  before: (...args: Parameters<RateLimiter[M]>) => Promise<unknown>,
  seen?: (answer: Promise<unknown>) => void,
): Env["LIMITER"] {
  return wrappedCalls(method, (call, args) => {
    const answer = before(...args).then(call);
    seen?.(answer);
    return answer;
  });
}

/**
 * The real objects, each call of `method` made at once and its answer handed back once `after(answer)` settles: an
 * object that acts in time and whose answer comes back late (a slow way back from it).
 */
export function delayedAnswers<M extends Method>(method: M, after: (answer: unknown) => Promise<unknown>): Env["LIMITER"] {
  return wrappedCalls(method, (call) => call().then(async (answer) => (await after(answer), answer)));
}

/** The real objects, each call of `method` made through `wrap`. */
function wrappedCalls<M extends Method>(method: M | readonly M[], wrap: (call: () => Promise<unknown>, args: Parameters<RateLimiter[M]>) => Promise<unknown>): Env["LIMITER"] {
  const real = env.LIMITER;
  const slowed = (stub: DurableObjectStub<RateLimiter>) =>
    new Proxy(stub, {
      get: (target, prop) => {
        if (prop !== method && !(Array.isArray(method) && method.includes(prop))) return Reflect.get(target, prop);
        return (...args: Parameters<RateLimiter[M]>) => wrap(() => (target[prop as M] as (...a: Parameters<RateLimiter[M]>) => Promise<unknown>)(...args), args);
      },
    });
  return new Proxy(real, {
    get: (target, prop) => {
      if (prop === "get") return (id: DurableObjectId) => slowed(target.get(id));
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * The real objects, each call of `method` held until the test calls `answer()`: an object far behind on its
 * queue for as long as the test reads the outcome, and no longer. `seen` as for {@link delayedCalls}. Called
 * within a test; its calls are let go when the test ends too, so a failed check leaves no sync waiting for later tests.
 */
export function heldCalls<M extends Method>(method: M | readonly M[], seen?: (answer: Promise<unknown>) => void): { namespace: Env["LIMITER"]; answer(): void } {
  let answer!: () => void;
  const held = new Promise<void>((resolve) => (answer = resolve));
  onTestFinished(() => answer());
  return { namespace: delayedCalls(method, () => held, seen), answer };
}

/** The real objects, each sync made once `before(request)` settles. */
export function delayedSyncs(before: (request: SyncRequest) => Promise<unknown>): Env["LIMITER"] {
  return delayedCalls("sync", (_policy, request) => before(request));
}
