// A fast key pushed out of the isolate's table (FAST_MAX_KEYS) while a sync or a request is busy with it.
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { decideFast, localView, setCapacity, type FastContext } from "../../src/fast";
import type { SyncRequest } from "../../src/fast/lease";
import { delayedSyncs } from "../helpers/namespace";
import { rule } from "../helpers/rules";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const daily = { algorithm: "sliding-window", limit: 10, periodMs: 86_400_000, burst: 10, buckets: 1 } as const;
// Booked calls a minute apart: no timer makes one within the test.
const fastDaily = (name: string) => rule({ name, mode: "fast", aggregate: undefined, limit: 10, periodMs: daily.periodMs, syncMs: 60_000, timeoutMs: 5_000 });
const remaining = async (objectName: string) => (await env.LIMITER.get(env.LIMITER.idFromName(objectName)).peek(daily)).remaining;

/** A context that can hold its next sync (of those `which` picks) until told (`holdNext`), and whose `waitUntil`s `settled` awaits. */
function holding() {
  let hold: { which: (request: SyncRequest) => boolean; until: Promise<void> } | undefined;
  const pending: Promise<unknown>[] = [];
  const context: FastContext = {
    namespace: delayedSyncs(async (request) => {
      const held = hold?.which(request) ? hold.until : undefined;
      if (held) hold = undefined;
      await held;
    }),
    waitUntil: (p) => void pending.push(p),
  };
  const holdNext = (which: (request: SyncRequest) => boolean = () => true) => {
    let open!: () => void;
    hold = { which, until: new Promise<void>((resolve) => (open = resolve)) };
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
    const leased = localView(context.namespace, "evict-inflight/a")!.leased;
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

  it("has what it gave back counted when it comes back before the object answered that", async () => {
    const { context, holdNext, settled } = holding();
    const fast = fastDaily("evict-return");
    setCapacity(1);
    for (let i = 0; i < 2; i++) expect(await decideFast(context, fast, "evict-return/a", 1)).toMatchObject({ allowed: true });
    // Pushed out, it gives back its lease with a release that is slow on its way.
    const open = holdNext((request) => request.release === true);
    setTimeout(open, 50);
    await decideFast(context, fast, "evict-return/b", 1);
    expect(await decideFast(context, fast, "evict-return/a", 1)).toMatchObject({ allowed: true });
    // Pushed out again, it gives back its new lease as well.
    await decideFast(context, fast, "evict-return/b", 1);
    await settled();
    expect(await remaining("evict-return/a")).toBe(10 - 3);
  });
});
