// The rate-limit header forms through the Worker, as RATE_LIMIT_HEADERS and LEGACY_HEADERS choose them.
import { parseList } from "structured-headers";
import { describe, expect, it } from "vitest";
import { originLog, send } from "../helpers/worker";

const get = (path: string, ip: string) => new Request(`http://floodgate.test${path}`, { headers: { "CF-Connecting-IP": ip } });

/** Every response header whose name starts with `ratelimit` or `x-ratelimit`, lower-cased. */
const rateLimitFields = (res: Response) => [...res.headers.keys()].filter((name) => /^(x-)?ratelimit/.test(name));

describe("header forms through the Worker", () => {
  it("sends draft-10 and the X-RateLimit-* fields when nothing is configured", async () => {
    const rules = [{ name: "h-default", limit: 5, period: "1m" }];
    const res = await send(get("/h-default/a", "192.0.2.120"), { rules });
    expect(res.status).toBe(200);
    expect(rateLimitFields(res).sort()).toEqual(["ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]);
    expect(res.headers.get("RateLimit-Policy")).toBe('"h-default";q=5;w=60');
  });

  it("sends draft-7 fields and Retry-After on a 429 with RATE_LIMIT_HEADERS draft-7", async () => {
    const rules = [{ name: "h-draft7", algorithm: "token-bucket", limit: 1, period: "1m" }];
    const bindings = { rules, RATE_LIMIT_HEADERS: "draft-7" };
    expect((await send(get("/h-draft7/a", "192.0.2.121"), bindings)).status).toBe(200);
    const res = await send(get("/h-draft7/b", "192.0.2.121"), bindings);
    expect(res.status).toBe(429);
    const retryAfter = Number(res.headers.get("Retry-After"));
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(res.headers.get("RateLimit")).toBe(`limit=1, remaining=0, reset=${retryAfter}`);
    expect(res.headers.get("RateLimit-Policy")).toBe("1;w=60");
    expect(res.headers.get("X-RateLimit-Reset")).toBe(String(retryAfter));
  });

  it("sends draft-6's separate fields with RATE_LIMIT_HEADERS draft-6", async () => {
    const rules = [{ name: "h-draft6", limit: 5, period: "1m" }];
    const res = await send(get("/h-draft6/a", "192.0.2.122"), { rules, RATE_LIMIT_HEADERS: "draft-6", LEGACY_HEADERS: "false" });
    expect(rateLimitFields(res).sort()).toEqual(["ratelimit-limit", "ratelimit-policy", "ratelimit-remaining", "ratelimit-reset"]);
    expect(res.headers.get("RateLimit-Remaining")).toBe("4");
  });

  it("sends no rate-limit field on an allowed response with RATE_LIMIT_HEADERS none and LEGACY_HEADERS false", async () => {
    const rules = [{ name: "h-none", limit: 5, period: "1m" }];
    const res = await send(get("/h-none/a", "192.0.2.123"), { rules, RATE_LIMIT_HEADERS: "none", LEGACY_HEADERS: "false" });
    expect(res.status).toBe(200);
    expect(rateLimitFields(res)).toEqual([]);
  });

  it("still sends Retry-After on a 429 with RATE_LIMIT_HEADERS none and LEGACY_HEADERS false", async () => {
    const rules = [{ name: "h-none-429", limit: 1, period: "1m" }];
    const bindings = { rules, RATE_LIMIT_HEADERS: "none", LEGACY_HEADERS: "false" };
    await send(get("/h-none-429/a", "192.0.2.124"), bindings);
    const res = await send(get("/h-none-429/b", "192.0.2.124"), bindings);
    expect(res.status).toBe(429);
    expect(rateLimitFields(res)).toEqual([]);
    expect(Number(res.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
  });

  it("follows a change of RATE_LIMIT_HEADERS or LEGACY_HEADERS under the same rules", async () => {
    const rules = [{ name: "h-change", limit: 50, period: "1m" }];
    const draft6 = await send(get("/h-change/a", "192.0.2.129"), { rules, RATE_LIMIT_HEADERS: "draft-6" });
    const draft7 = await send(get("/h-change/b", "192.0.2.129"), { rules, RATE_LIMIT_HEADERS: "draft-7" });
    const quiet = await send(get("/h-change/c", "192.0.2.129"), { rules, RATE_LIMIT_HEADERS: "draft-7", LEGACY_HEADERS: "false" });
    expect(draft6.headers.get("RateLimit-Limit")).toBe("50");
    expect(draft7.headers.get("RateLimit")).toMatch(/^limit=50, remaining=48, reset=\d+$/);
    expect(draft7.headers.has("X-RateLimit-Limit")).toBe(true);
    expect(quiet.headers.has("X-RateLimit-Limit")).toBe(false);
  });

  it("takes LEGACY_HEADERS as the boolean wrangler passes for a TOML boolean", async () => {
    const rules = [{ name: "h-bool", limit: 5, period: "1m" }];
    const res = await send(get("/h-bool/a", "192.0.2.125"), { rules, LEGACY_HEADERS: false });
    expect(res.headers.has("X-RateLimit-Limit")).toBe(false);
    expect(res.headers.has("RateLimit")).toBe(true);
  });
});

describe("t through the Worker", () => {
  it("counts to the next token on an allowed response, not to the full quota: 6 a minute, 3 taken, t=10", async () => {
    const rules = [{ name: "h-next", algorithm: "token-bucket", limit: 6, period: "1m" }];
    let res: Response | undefined;
    for (let i = 0; i < 3; i++) res = await send(get(`/h-next/${i}`, "192.0.2.126"), { rules });
    const [item] = parseList(res!.headers.get("RateLimit")!);
    expect(Object.fromEntries(item![1])).toEqual({ r: 3, t: 10 });
    expect(res!.headers.get("X-RateLimit-Reset")).toBe("10");
  });

  it("equals Retry-After on a 429", async () => {
    const rules = [{ name: "h-429", limit: 2, period: "1m" }];
    for (let i = 0; i < 2; i++) await send(get(`/h-429/${i}`, "192.0.2.127"), { rules });
    const res = await send(get("/h-429/x", "192.0.2.127"), { rules });
    expect(res.status).toBe(429);
    const [item] = parseList(res.headers.get("RateLimit")!);
    expect(item![1].get("t")).toBe(Number(res.headers.get("Retry-After")));
  });
});

describe("invalid header settings", () => {
  /** What the error must tell the user they may write instead. */
  const CHOICES: Record<string, string[]> = { RATE_LIMIT_HEADERS: ["draft-10", "draft-7", "draft-6", "none"], LEGACY_HEADERS: ["true", "false"] };

  it.each([
    ["RATE_LIMIT_HEADERS", "draft-8"],
    ["RATE_LIMIT_HEADERS", "Draft-10"],
    ["LEGACY_HEADERS", "yes"],
    ["LEGACY_HEADERS", "0"],
  ])("answers 500 problem+json naming %s for %j, and never reaches the origin", async (name, value) => {
    const rules = [{ name: "h-bad", limit: 5, period: "1m" }];
    const res = await send(get("/h-bad-config/a", "192.0.2.128"), { rules, [name]: value });
    expect(res.status).toBe(500);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    const problem = (await res.json()) as { type: string; detail: string };
    expect(problem.type).toBe("urn:floodgate:problem:invalid-config");
    expect(problem.detail.startsWith(`${name}: expected `)).toBe(true);
    for (const choice of CHOICES[name]!) expect(problem.detail).toContain(JSON.stringify(choice));
    expect(problem.detail).toMatch(new RegExp(`got ${JSON.stringify(value)}$`));
    expect(await originLog("h-bad-config")).toEqual([]);
  });
});
