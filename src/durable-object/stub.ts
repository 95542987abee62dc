/** The stub for a key's RateLimiter: ids are cached per isolate, stubs are made per request. */
import type { Env } from "../env";
import type { RateLimiter } from "./rate-limiter";

type Namespace = Env["LIMITER"];

/** Enough ids for every hot key; past it the cache starts over rather than grow. */
const MAX_IDS = 10_000;
const ids = new WeakMap<Namespace, Map<string, DurableObjectId>>();

/**
 * The stub of the object named `name`. Deriving an id hashes the name, so ids are kept; a stub
 * belongs to the request that made it, so it is not.
 */
export function limiterStub(namespace: Namespace, name: string): DurableObjectStub<RateLimiter> {
  let known = ids.get(namespace);
  if (!known) ids.set(namespace, (known = new Map()));
  let id = known.get(name);
  if (!id) {
    if (known.size >= MAX_IDS) known.clear();
    known.set(name, (id = namespace.idFromName(name)));
  }
  return namespace.get(id);
}
