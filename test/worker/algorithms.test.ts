// fixed-window, sliding-log and gcra through the Worker and a real origin: strict for each, fast where supported.
import { afterEach, describe, expect, it, vi } from "vitest";
import { frozenStart } from "../helpers/clock";
import { PATIENT_TIMEOUT } from "../helpers/rules";
import { originLog, send } from "../helpers/worker";

const get = (path: string, ip = "192.0.2.1") => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });
const statuses = (responses: Response[]) => responses.map((r) => r.status);

/** Sends `n` requests one after another and returns their statuses. */
async function inTurn(n: number, path: string, rules: unknown[], ip?: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await send(get(`${path}/${i}`, ip), { rules })).status);
  return out;
}

describe.each(["strict", "fast"] as const)("fixed window through the Worker (%s)", (mode) => {
  it("admits exactly the limit in the window, only those reach the origin, and says when the window ends", async () => {
    const tag = `alg-fixed-${mode}`;
    const rules = [{ name: tag, algorithm: "fixed-window", limit: 4, period: "1d", mode }];
    expect(await inTurn(7, `/${tag}`, rules)).toEqual([200, 200, 200, 200, 429, 429, 429]);
    expect(await originLog(tag)).toHaveLength(4);
    const denied = await send(get(`/${tag}/last`), { rules });
    const endsIn = Math.ceil((Math.ceil(Date.now() / 86_400_000) * 86_400_000 - Date.now()) / 1_000);
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThanOrEqual(endsIn - 2);
    expect(Number(denied.headers.get("Retry-After"))).toBeLessThanOrEqual(endsIn + 1);
  });

  it("admits exactly the limit out of 60 concurrent requests", async () => {
    const tag = `alg-fixed-conc-${mode}`;
    const rules = [{ name: tag, algorithm: "fixed-window", limit: 15, period: "1d", mode, timeout: PATIENT_TIMEOUT }];
    const responses = await Promise.all(Array.from({ length: 60 }, (_, i) => send(get(`/${tag}/${i}`, "192.0.2.2"), { rules })));
    expect(statuses(responses).filter((s) => s === 200)).toHaveLength(15);
  });
});

describe.each(["strict", "fast"] as const)("fixed window by calendar month through the Worker (%s)", (mode) => {
  afterEach(() => void vi.useRealTimers());

  it("denies until the 1st of the next month, 00:00 UTC, and admits from then", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = new Date(frozenStart());
    const turn = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
    vi.setSystemTime(turn - 2_000);
    const tag = `alg-month-${mode}`;
    const rules = [{ name: tag, algorithm: "fixed-window", limit: 2, period: "1mo", mode }];

    expect(await inTurn(2, `/${tag}`, rules)).toEqual([200, 200]);
    const denied = await send(get(`/${tag}/over`), { rules });
    vi.setSystemTime(turn);
    const next = await send(get(`/${tag}/next`), { rules });

    expect(denied.status).toBe(429);
    expect(denied.headers.get("Retry-After")).toBe("2");
    expect(denied.headers.get("RateLimit-Policy")).toBe(`"${tag}";q=2;w=2678400`);
    expect(next.status).toBe(200);
    expect(await originLog(tag)).toHaveLength(3);
  });
});

describe.each(["strict", "fast"] as const)("sliding log through the Worker (%s)", (mode) => {
  it("admits exactly the limit in the period, and only those reach the origin", async () => {
    const tag = `alg-log-${mode}`;
    const rules = [{ name: tag, algorithm: "sliding-log", limit: 5, period: "1h", mode }];
    expect(await inTurn(8, `/${tag}`, rules, "192.0.2.3")).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(await originLog(tag)).toHaveLength(5);
  });

  it("admits exactly the limit out of 60 concurrent requests", async () => {
    const tag = `alg-log-conc-${mode}`;
    const rules = [{ name: tag, algorithm: "sliding-log", limit: 12, period: "1h", mode, timeout: PATIENT_TIMEOUT }];
    const responses = await Promise.all(Array.from({ length: 60 }, (_, i) => send(get(`/${tag}/${i}`, "192.0.2.4"), { rules })));
    expect(statuses(responses).filter((s) => s === 200)).toHaveLength(12);
  });

  it("admits again once the oldest request has left a short period", async () => {
    const tag = `alg-log-short-${mode}`;
    const rules = [{ name: tag, algorithm: "sliding-log", limit: 2, period: "1s", mode, ...(mode === "fast" ? { sync: "100ms" } : {}) }];
    expect(await inTurn(3, `/${tag}`, rules, "192.0.2.5")).toEqual([200, 200, 429]);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect((await send(get(`/${tag}/again`, "192.0.2.5"), { rules })).status).toBe(200);
  });
});

describe("GCRA through the Worker (strict)", () => {
  it("admits 1 + burst at once and tells the rest to come back after one emission interval", async () => {
    const tag = "alg-gcra";
    const rules = [{ name: tag, algorithm: "gcra", limit: 1, period: "1m", burst: 2 }];
    expect(await inTurn(5, `/${tag}`, rules, "192.0.2.6")).toEqual([200, 200, 200, 429, 429]);
    expect(await originLog(tag)).toHaveLength(3);
    const denied = await send(get(`/${tag}/last`, "192.0.2.6"), { rules });
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThan(55);
    expect(Number(denied.headers.get("Retry-After"))).toBeLessThanOrEqual(60);
  });

  it("admits exactly 1 + burst out of 40 concurrent requests", async () => {
    const rules = [{ name: "alg-gcra-conc", algorithm: "gcra", limit: 10, period: "1h", burst: 7, timeout: PATIENT_TIMEOUT }];
    const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => send(get(`/alg-gcra-conc/${i}`, "192.0.2.7"), { rules })));
    expect(statuses(responses).filter((s) => s === 200)).toHaveLength(8);
  });

  it("answers a fast gcra rule with a 500 naming the mode, never reaching the origin", async () => {
    const rules = [{ name: "alg-gcra-fast", algorithm: "gcra", limit: 10, period: "1m", mode: "fast" }];
    const res = await send(get("/alg-gcra-fast/x", "192.0.2.8"), { rules });
    expect(res.status).toBe(500);
    expect(await res.text()).toContain("strict-only");
    expect(await originLog("alg-gcra-fast")).toHaveLength(0);
  });
});
