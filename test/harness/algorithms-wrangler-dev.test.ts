// fixed-window, sliding-log and a token bucket's warmup from outside: one `wrangler dev` with rules from vars, driven over real HTTP, a real origin counting what arrives.
import { describe, expect, it } from "vitest";
import { arrivals, useWranglerDevWithOrigin } from "./wrangler-dev";

const PERIOD_MS = 2_000;
const LIMIT = 5;
const rules = [
  { name: "fixed-dev", match: { path: "/fixed-dev/*" }, key: "global", algorithm: "fixed-window", limit: LIMIT, period: "2s" },
  { name: "log-dev", match: { path: "/log-dev/*" }, key: "global", algorithm: "sliding-log", limit: LIMIT, period: "2s" },
  // 2 a second: a warm unit refills in 500 ms, a fully cold one in 1.5 s. The plain bucket is the control.
  { name: "warm-dev", match: { path: "/warm-dev/*" }, key: "global", algorithm: "token-bucket", limit: 2, period: "1s", burst: 2, warmup: "20s" },
  { name: "plain-dev", match: { path: "/plain-dev/*" }, key: "global", algorithm: "token-bucket", limit: 2, period: "1s", burst: 2 },
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("fixed-window, sliding-log and warmup through wrangler dev", () => {
  const served = useWranglerDevWithOrigin("algorithms", rules);
  const arrived = (tag: string) => arrivals(served.originUrl, tag);

  /** `count` requests at once; their statuses, once every body is read. */
  async function burst(tag: string, count: number): Promise<number[]> {
    const responses = await Promise.all(Array.from({ length: count }, (_, i) => served.dev.fetch(`/${tag}/${Date.now()}-${i}`)));
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    return responses.map((r) => r.status);
  }

  it("a fixed window admits the limit per epoch-aligned window, and twice the limit across a boundary", async () => {
    // The middle of a window, with a second to spare before its end.
    const boundary = Math.ceil((Date.now() + PERIOD_MS / 2) / PERIOD_MS) * PERIOD_MS;
    await sleep(boundary - PERIOD_MS / 2 - Date.now());
    const before = await burst("fixed-dev", LIMIT + 3);
    const beforeEnded = Date.now();
    await sleep(boundary + 100 - Date.now());
    const after = await burst("fixed-dev", LIMIT + 3);

    expect(beforeEnded).toBeLessThan(boundary);
    const admitted = (statuses: number[]) => statuses.filter((s) => s === 200).length;
    expect([admitted(before), admitted(after)]).toEqual([LIMIT, LIMIT]);
    expect([...before, ...after].filter((s) => s !== 200).every((s) => s === 429)).toBe(true);
    // The origin's count is the truth: 2 × limit arrived, all within about 600 ms, well inside one period.
    const at = await arrived("fixed-dev");
    expect(at).toHaveLength(2 * LIMIT);
    expect(at[at.length - 1]! - at[0]!).toBeLessThan(PERIOD_MS);
  }, 20_000);

  it("a sliding log never lets more than the limit through in any period", async () => {
    // Bursts of 4 every 250 ms for 5 s: always more than the limit asks, so it is reached again and
    // again. Starting half a second before an epoch-aligned boundary, as a fixed window would let
    // twice the limit through across it.
    const boundary = Math.ceil((Date.now() + PERIOD_MS / 4) / PERIOD_MS) * PERIOD_MS;
    await sleep(boundary - PERIOD_MS / 4 - Date.now());
    const started = Date.now();
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      statuses.push(...(await burst("log-dev", 4)));
      await sleep(started + (i + 1) * 250 - Date.now());
    }
    const at = await arrived("log-dev");
    expect(at).toHaveLength(statuses.filter((s) => s === 200).length);
    // Every interval one period long that starts at an arrival, less what the hop from the decision
    // to the origin can add between two arrivals on a loaded machine.
    const slack = 100;
    const most = Math.max(...at.map((from) => at.filter((t) => t >= from && t < from + PERIOD_MS - slack).length));
    expect(most).toBe(LIMIT);
    // A period is full again as soon as the oldest unit leaves it: 5 s of asking admits 3 periods' worth.
    expect(at.length).toBeGreaterThanOrEqual(2 * LIMIT + 1);
  }, 20_000);

  it("a cold token bucket with a warmup passes its burst, then refills at a third of the rate where a plain one refills at the rate", async () => {
    const warm = await burst("warm-dev", 3);
    const warmEnded = Date.now();
    const plain = await burst("plain-dev", 3);
    const plainEnded = Date.now();
    // The third of each burst is denied: the cold bucket's unit is 1.5 s away, the plain one's 0.5 s.
    const retryAfter = async (tag: string) => (await served.dev.fetch(`/${tag}/retry`)).headers.get("Retry-After");
    const [warmRetry, plainRetry] = [await retryAfter("warm-dev"), await retryAfter("plain-dev")];
    // Each bucket timed from the end of its own burst, which its decisions came before, not from before both bursts:
    // at a fixed 800 ms, the plain unit was back only if both bursts were decided within 300 ms. The warm one is asked
    // then too, still before its unit comes unless the two bursts took 900 ms.
    await sleep(plainEnded + 600 - Date.now());
    const plainBack = [...(await burst("warm-dev", 1)), ...(await burst("plain-dev", 1))];
    await sleep(warmEnded + 1_600 - Date.now());
    const warmBack = await burst("warm-dev", 1);

    expect(warm).toEqual([200, 200, 429]);
    expect(plain).toEqual([200, 200, 429]);
    expect([warmRetry, plainRetry]).toEqual(["2", "1"]);
    expect(plainBack).toEqual([429, 200]);
    expect(warmBack).toEqual([200]);
    // The origin saw the cold bucket's third request at least its cold interval after the first.
    const at = await arrived("warm-dev");
    expect(at).toHaveLength(3);
    expect(at[2]! - at[0]!).toBeGreaterThanOrEqual(1_400);
  }, 20_000);
});
