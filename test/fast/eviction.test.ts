// A fast key pushed out of the isolate's table (FAST_MAX_KEYS) while a sync or a request is busy with it.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { decideFast, localView, setCapacity, type FastContext } from "../../src/fast";
import { delayedSyncs } from "../helpers/namespace";
import { rule } from "../helpers/rules";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const daily = { algorithm: "sliding-window", limit: 10, periodMs: 86_400_000, burst: 10, buckets: 1 } as const;
const fastDaily = (name: string) => rule({ name, mode: "fast", aggregate: undefined, limit: 10, periodMs: daily.periodMs, timeoutMs: 5_000 });
const remaining = async (objectName: string) => (await env.LIMITER.get(env.LIMITER.idFromName(objectName)).peek(daily)).remaining;

/** A context that can hold its next sync until told (`holdNext`), and whose `waitUntil`s `settled` awaits. */
function holding() {
  let next: Promise<unknown> = Promise.resolve();
  const pending: Promise<unknown>[] = [];
  const context: FastContext = {
    namespace: delayedSyncs(() => {
      const held = next;
      next = Promise.resolve();
      return held;
    }),
    waitUntil: (p) => void pending.push(p),
  };
  const holdNext = () => {
    let open!: () => void;
    next = new Promise<void>((resolve) => (open = resolve));
    return open;
  };
  const settled = async () => {
    while (pending.length) await pending.shift()!.catch(() => undefined);
  };
  return { context, holdNext, settled };
}

afterEach(() => setCapacity(undefined));

describe("an evicted fast key", () => {
  it("gives back the lease its sync in flight brings, once the request waiting on it has spent from it", async () => {
    const { context, holdNext, settled } = holding();
    const fast = fastDaily("evict-inflight");
    setCapacity(1);
    expect(await decideFast(context, fast, "evict-inflight/a", 1)).toMatchObject({ allowed: true });
    const leased = localView("evict-inflight/a")!.leased;
    // More than the lease holds: the request waits on a sync the object answers only after the key is out.
    const open = holdNext();
    const waiting = decideFast(context, fast, "evict-inflight/a", leased + 1);
    await sleep(20);
    await decideFast(context, fast, "evict-inflight/b", 1);
    open();
    expect(await waiting).toMatchObject({ allowed: true });
    await settled();
    // Only what was admitted is counted: nothing stays pinned for the rest of the day.
    expect(await remaining("evict-inflight/a")).toBe(10 - 1 - (leased + 1));
  });
});
