/** The stub for a key's RateLimiter (ids are cached per isolate, stubs are made per request), and the name the isolate keeps the key by. */
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
  return namespace.get(objectId(namespace, name));
}

/** The id of the object named `name` in `namespace`: one object's, where two namespaces of the class (a jurisdiction's) have objects of one name. */
export function objectId(namespace: Namespace, name: string): DurableObjectId {
  let known = ids.get(namespace);
  if (!known) ids.set(namespace, (known = new Map()));
  let id = known.get(name);
  if (!id) {
    if (known.size >= MAX_IDS) known.clear();
    known.set(name, (id = namespace.idFromName(name)));
  }
  return id;
}

const tags = new WeakMap<Namespace, string>();
/** each namespace's tag, by the id it derives from one name: the same for every object of that namespace (a jurisdiction's is made anew by each `jurisdiction()` call) */
const tagsById = new Map<string, string>();

/**
 * What an isolate puts before an object's name (see {@link trackedName}) to tell objects of one name in two
 * namespaces of the class apart (a jurisdiction's, another binding's): nothing for the first
 * namespace it meets, a Worker's usual only one, so that its keys cost no new string; `<n>\n` for
 * each other, which no object's name starts with (its rule's name, before the first "/", holds no line break).
 */
export function namespaceTag(namespace: Namespace): string {
  let tag = tags.get(namespace);
  if (tag === undefined) {
    // No object is made for it; and none has this name, which lacks a key's "/".
    const id = namespace.idFromName("namespace").toString();
    tag = tagsById.get(id) ?? (tagsById.size === 0 ? "" : `${tagsById.size}\n`);
    tagsById.set(id, tag);
    tags.set(namespace, tag);
  }
  return tag;
}

/**
 * The name an isolate's memories of a key go by (its fast lease, its strict denials, breaker, last
 * answer and batches, its local fallback counters): its object's, tagged with its namespace's (see
 * {@link namespaceTag}), since one namespace's denial or failure says nothing of the other's object.
 */
export function trackedName(namespace: Namespace, objectName: string): string {
  return namespaceTag(namespace) + objectName;
}

/**
 * The namespace of the object `id` names, found in its Worker's `env`: a user's Worker may bind
 * RateLimiter under any name, and an id is valid in its own class's namespace only. A relay needs it
 * to reach the keys' objects it forwards to. For an object of a jurisdiction (a relay the isolates
 * reached through `env.LIMITER.jurisdiction("eu")`), that jurisdiction's: the binding itself takes
 * the id, but derives another object from a key's name, outside the jurisdiction, which counts apart.
 */
export function ownNamespace(env: object, id: DurableObjectId): Namespace {
  const own = Object.values(env).find((value): value is Namespace => isNamespace(value) && holds(value, id));
  if (!own) throw new Error("RateLimiter is not bound in its own Worker's env: a fast rule's relays (aggregate) reach the keys' objects through that binding; add a durable_objects binding for the class to the Worker that exports it");
  return id.jurisdiction ? own.jurisdiction(id.jurisdiction as DurableObjectJurisdiction) : own;
}

/** Whether `id` names an object of `namespace`'s class: another class's namespace throws on it. */
function holds(namespace: Namespace, id: DurableObjectId): boolean {
  try {
    return namespace.idFromString(id.toString()).equals(id);
  } catch {
    return false;
  }
}

/** Whether `value` is a Durable Object namespace, by its tag: an RPC stub (a service binding) answers to any method name, so duck typing would take it for one. */
export function isNamespace(value: unknown): value is Namespace {
  return Object.prototype.toString.call(value) === "[object DurableObjectNamespace]";
}
