// The key's Durable Object evicted in the middle of traffic through the Worker: no count is lost or doubled.
import { abortAllDurableObjects } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { originLog, send } from "../helpers/worker";

describe("eviction in the middle of traffic", () => {
  it("admits exactly the limit while the object is evicted between and during concurrent waves", async () => {
    const limit = 30;
    // onError deny: a call cut off by the eviction is refused, never admitted on local counters.
    const rules = [{ name: "evict-waves", key: "global", limit, period: "1h", onError: "deny" }];
    const tag = "evict-waves";
    const wave = (round: number, size: number) =>
      Array.from({ length: size }, (_, i) => send(new Request(`http://floodgate.test/${tag}/${round}/${i}`), { rules }).then((r) => r.status));

    const statuses: number[] = [];
    for (let round = 0; round < 5; round++) {
      // A wave that completes, then an eviction between waves: the next wave's object starts from storage.
      statuses.push(...(await Promise.all(wave(round * 2, 8))));
      await abortAllDurableObjects();
      // A wave cut into by an eviction while its calls are in flight.
      const inFlight = wave(round * 2 + 1, 8);
      await new Promise((resolve) => setTimeout(resolve, 2));
      await abortAllDurableObjects();
      statuses.push(...(await Promise.all(inFlight)));
    }
    // Then calm traffic, decided by the object alone, until it denies at the limit. The evictions may
    // have opened the key's breaker (onError deny answers 429 with Retry-After: 1 without asking the
    // object, for up to several seconds): calm traffic waits that out rather than run out first.
    const calmUntil = Date.now() + 20_000;
    for (let i = 0; Date.now() < calmUntil; i++) {
      const response = await send(new Request(`http://floodgate.test/${tag}/${100 + i}/0`), { rules });
      statuses.push(response.status);
      if (response.status === 429 && Number(response.headers.get("Retry-After")) > 1) break;
      if (response.status === 429) await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const admitted = statuses.filter((s) => s === 200).length;
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    expect(admitted).toBe(limit);
    expect(await originLog(tag)).toHaveLength(limit);
  }, 30_000);
});
