// A LIMITER namespace in front of the real one, whose syncs wait first: a slow object, or a slow path to it.
import { env } from "cloudflare:test";
import type { Policy } from "../../src/algorithms";
import type { Env } from "../../src/env";
import type { SyncRequest } from "../../src/fast/lease";

/** The real objects, each sync made once `before(request)` settles. */
export function delayedSyncs(before: (request: SyncRequest) => Promise<unknown>): Env["LIMITER"] {
  const real = env.LIMITER;
  return {
    idFromName: (name: string) => real.idFromName(name),
    get: (id: DurableObjectId) =>
      new Proxy(real.get(id), {
        get: (stub, prop) =>
          prop === "sync" ? async (policy: Policy, request: SyncRequest) => (await before(request), stub.sync(policy, request)) : Reflect.get(stub, prop),
      }),
  } as unknown as Env["LIMITER"];
}
