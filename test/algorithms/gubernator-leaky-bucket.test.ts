// floodgate's token bucket against gubernator's LEAKY_BUCKET (algorithms.go, leakyBucket), the mapping the README gives, on the same traffic.
import { describe, expect, it } from "vitest";
import { decide, type LimiterState, type Policy } from "../../src/algorithms";

/**
 * One key of gubernator's LEAKY_BUCKET, one hit a call: `remaining` a float that leaks back
 * `limit` per `duration`, added only once a whole unit has leaked, capped when its whole part
 * passes `burst`; a hit that takes the last whole unit leaves 0, its fraction dropped. The key is
 * forgotten once `duration` passes without a hit (the cache item's expiry), and starts full again.
 */
class GubernatorLeakyBucket {
  private item: { remaining: number; updatedAt: number; expireAt: number } | undefined;
  constructor(
    private readonly limit: number,
    private readonly duration: number,
    private readonly burst: number,
  ) {}

  hit(now: number): boolean {
    if (this.item && this.item.expireAt < now) this.item = undefined;
    if (!this.item) {
      this.item = { remaining: this.burst - 1, updatedAt: now, expireAt: now + this.duration };
      return true;
    }
    const b = this.item;
    b.expireAt = now + this.duration;
    const leak = (now - b.updatedAt) / (this.duration / this.limit);
    if (Math.trunc(leak) > 0) {
      b.remaining += leak;
      b.updatedAt = now;
    }
    if (Math.trunc(b.remaining) > this.burst) b.remaining = this.burst;
    if (Math.trunc(b.remaining) === 0) return false;
    if (Math.trunc(b.remaining) === 1) b.remaining = 0;
    else b.remaining -= 1;
    return true;
  }
}

const T0 = 1_700_000_000_000;

/** Each side's admissions at T0 + each offset, under `{"algorithm": "token-bucket", "burst": burst}` and LEAKY_BUCKET. */
function both(limit: number, duration: number, burst: number, offsets: number[]) {
  const policy: Policy = { algorithm: "token-bucket", limit, periodMs: duration, burst, buckets: 1 };
  const gubernator = new GubernatorLeakyBucket(limit, duration, burst);
  let state: LimiterState | undefined;
  const ours: boolean[] = [];
  const theirs: boolean[] = [];
  for (const offset of offsets) {
    const outcome = decide(policy, state, 1, T0 + offset);
    state = outcome.state;
    ours.push(outcome.decision.allowed);
    theirs.push(gubernator.hit(T0 + offset));
  }
  return { ours, theirs };
}

describe("token bucket against gubernator's LEAKY_BUCKET", () => {
  it("gives a burst above the limit back at the rate after an idle spell, where gubernator forgets the key after duration and gives all of it back", () => {
    // 1 a minute, burst 5: drained at once, then left alone just past a minute.
    const { ours, theirs } = both(1, 60_000, 5, [0, 0, 0, 0, 0, 60_001, 60_001, 60_001]);
    expect(ours).toEqual([true, true, true, true, true, true, false, false]);
    expect(theirs).toEqual([true, true, true, true, true, true, true, true]);
  });

  it("keeps the fraction of a unit gubernator drops when a hit takes the last whole unit", () => {
    // 10 a second, burst 2: 1.7 units back at 170 ms; the hit then leaves 0.7 here, 0 there.
    const { ours, theirs } = both(10, 1_000, 2, [0, 0, 170, 200, 270]);
    expect(ours).toEqual([true, true, true, true, false]);
    expect(theirs).toEqual([true, true, true, false, true]);
  });
});
