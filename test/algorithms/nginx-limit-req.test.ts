// floodgate's gcra against nginx's limit_req (ngx_http_limit_req_module.c), decision for decision, on the same traffic.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decide, type LimiterState, type Policy } from "../../src/algorithms";

/**
 * One key of one limit_req zone, as nginx 1.29 keeps it: `excess` in milli-requests, the time in
 * ms, the rate in milli-requests a second (`rate=10r/s` is 10000, `rate=7r/m` is 7000 / 60,
 * truncated), `burst` and `delay` times 1000 (`nodelay`: never delayed). A lookup that finds
 * excess above burst rejects and changes nothing; otherwise it stores the excess, and moves `last`
 * only when some ms passed. The delay is (excess − delay) / rate, truncated to the ms.
 */
class NginxLimitReq {
  private node: { excess: number; last: number } | undefined;
  private readonly rate: number;
  constructor(
    perUnit: number,
    scale: 1 | 60,
    private readonly burst: number,
    private readonly delay: number | "nodelay",
  ) {
    this.rate = Math.floor((perUnit * 1000) / scale);
  }

  request(now: number): { allowed: boolean; holdMs: number } {
    let excess = 0;
    if (this.node) {
      let ms = now - this.node.last;
      if (ms < -60_000) ms = 1;
      else if (ms < 0) ms = 0;
      excess = Math.max(0, this.node.excess - Math.floor((this.rate * ms) / 1000) + 1000);
      if (excess > this.burst * 1000) return { allowed: false, holdMs: 0 };
      this.node.excess = excess;
      if (ms) this.node.last = now;
    } else {
      this.node = { excess: 0, last: now };
    }
    const delay = this.delay === "nodelay" ? Number.MAX_SAFE_INTEGER : this.delay * 1000;
    return { allowed: true, holdMs: excess <= delay ? 0 : Math.floor(((excess - delay) * 1000) / this.rate) };
  }
}

const T0 = 1_700_000_000_000;

/** floodgate's rule for `rate=<perUnit>r/s` (or r/m), `burst=`, and `delay=N`, `nodelay` or neither (0): a delay above the burst delays nothing, as `nodelay`. */
function mapped(perUnit: number, scale: 1 | 60, burst: number, delay: number | "nodelay"): Policy {
  return { algorithm: "gcra", limit: perUnit, periodMs: scale * 1000, burst, buckets: 1, delay: delay === "nodelay" ? burst : Math.min(delay, burst) };
}

function replayBoth(perUnit: number, scale: 1 | 60, burst: number, delay: number | "nodelay", gaps: number[]) {
  const nginx = new NginxLimitReq(perUnit, scale, burst, delay);
  const policy = mapped(perUnit, scale, burst, delay);
  let state: LimiterState | undefined;
  let now = T0;
  return gaps.map((gap) => {
    now += gap;
    const outcome = decide(policy, state, 1, now);
    state = outcome.state;
    return { at: now, ours: { allowed: outcome.decision.allowed, holdMs: outcome.decision.holdMs ?? 0 }, nginx: nginx.request(now) };
  });
}

describe("gcra against nginx limit_req", () => {
  it("admits exactly the requests nginx admits at a rate in r/s, holding each as long as nginx delays it or 1 ms longer (nginx truncates the ms)", () => {
    const delayOf = fc.oneof(fc.integer({ min: 0, max: 25 }), fc.constant<"nodelay">("nodelay"));
    const gaps = fc.array(fc.nat({ max: 400 }), { maxLength: 200, size: "max" });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 20 }), delayOf, gaps, (perSecond, burst, delay, traffic) => {
        for (const { ours, nginx } of replayBoth(perSecond, 1, burst, delay, traffic)) {
          expect(ours.allowed).toBe(nginx.allowed);
          expect(ours.holdMs - nginx.holdMs).toBeGreaterThanOrEqual(0);
          expect(ours.holdMs - nginx.holdMs).toBeLessThanOrEqual(1);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("meters a rate per minute exactly, where nginx keeps it in thousandths of a request a second (rate=1r/m leaks one every 62.5 s)", () => {
    const [, at60s, , at62499ms, at62500ms] = replayBoth(1, 60, 0, 0, [0, 60_000, 0, 2_499, 1]).map((s) => s.nginx.allowed);
    expect([at60s, at62499ms, at62500ms]).toEqual([false, false, true]);
    expect(replayBoth(1, 60, 0, 0, [0, 59_999, 1]).map((s) => s.ours.allowed)).toEqual([true, false, true]);
  });
});
