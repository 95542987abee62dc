import { describe, expect, it, vi } from "vitest";
import { parseConfig } from "../../src/config/rules";
import { Metrics } from "../../src/metrics/metrics";
import { delayedCalls, heldCalls } from "../helpers/namespace";
import { send } from "../helpers/worker";

const TOKEN = "s3cret-admin-token";
const rules = [
  { name: "adm-window", limit: 3, period: "1m" },
  { name: "adm-bucket", algorithm: "token-bucket", key: ["ip", "header:x-api-key"], limit: 5, period: "10s", burst: 8, cost: "header:x-cost", match: { path: "/api/*", methods: ["get", "POST"] } },
];
const admin = (path: string, init: RequestInit = {}, token: string | null = TOKEN) =>
  send(
    new Request(`http://floodgate.test/__floodgate/${path}`, {
      ...init,
      headers: token === null ? {} : { Authorization: `Bearer ${token}` },
    }),
    { rules, ADMIN_TOKEN: TOKEN },
  );
const hit = (ip: string) => send(new Request("http://floodgate.test/adm/x", { headers: { "CF-Connecting-IP": ip } }), { rules, ADMIN_TOKEN: TOKEN });

describe("admin API", () => {
  it("does not exist without ADMIN_TOKEN", async () => {
    const res = await send(new Request("http://floodgate.test/__floodgate/rules", { headers: { Authorization: "Bearer x" } }), { rules });
    expect(res.status).toBe(404);
  });

  it("counts and logs each 401, nothing of the token it was sent", async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(line));
    const metric = async () => Number(/^floodgate_admin_refusals_total (\d+)$/m.exec(await (await admin("metrics")).text())?.[1] ?? 0);
    const before = await metric();
    await admin("rules", {}, "guessed-token-1");
    await admin("rules", {}, null);
    expect((await metric()) - before).toBe(2);
    spy.mockRestore();
    const refused = lines.filter((line) => line.includes('"admin_refused"'));
    expect(refused.map((line) => JSON.parse(line) as unknown)).toEqual([{ event: "admin_refused", status: 401 }, { event: "admin_refused", status: 401 }]);
    expect(refused.join("")).not.toContain("guessed");
  });

  it("serves its counters while the configuration is invalid, counting each request that error answered", async () => {
    const broken = { rules: [{ name: "x", limit: 1, period: "ten" }], ADMIN_TOKEN: TOKEN };
    const scrape = () => send(new Request("http://floodgate.test/__floodgate/metrics", { headers: { Authorization: `Bearer ${TOKEN}` } }), broken);
    const configErrors = async (res: Response) => Number(/^floodgate_errors_total\{kind="config"\} (\d+)$/m.exec(await res.text())?.[1] ?? 0);
    const first = await scrape();
    expect(first.status).toBe(200);
    const before = await configErrors(first);
    expect((await send(new Request("http://floodgate.test/api/x"), broken)).status).toBe(500);
    expect((await configErrors(await scrape())) - before).toBe(1);
  });

  it("answers 401 with the same body to a missing, malformed or wrong token", async () => {
    const answers = await Promise.all([
      admin("rules", {}, null),
      admin("rules", {}, `${TOKEN}x`),
      admin("rules", {}, TOKEN.slice(0, -1)),
      send(new Request("http://floodgate.test/__floodgate/rules", { headers: { Authorization: `Basic ${TOKEN}` } }), { rules, ADMIN_TOKEN: TOKEN }),
      admin("nothing-here", {}, "wrong"),
    ]);
    expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    const bodies = await Promise.all(answers.map((r) => r.text()));
    expect(new Set(bodies).size).toBe(1);
    expect(bodies[0]).not.toContain(TOKEN);
  });

  it("lists the rules as parsed, with defaults filled in", async () => {
    const body = (await (await admin("rules")).json()) as { rules: unknown[] };
    expect(body.rules[0]).toEqual({
      name: "adm-window",
      match: { path: "*", methods: null, host: null },
      key: ["ip"],
      algorithm: "sliding-window",
      limit: 3,
      period: "1m",
      periodMs: 60_000,
      burst: 3,
      buckets: 60,
      cost: 1,
      mode: "strict",
      onError: "local",
      timeout: "1s",
      ipv6Prefix: 56,
      dryRun: false,
    });
    expect(body.rules[1]).toMatchObject({ key: ["ip", "header:x-api-key"], burst: 8, cost: "header:x-cost", match: { methods: ["GET", "POST"] } });
  });

  it("shows a key's state without consuming it", async () => {
    await hit("192.0.2.70");
    const peek = () => admin("state?rule=adm-window&key=192.0.2.70");
    await peek();
    const body = (await (await peek()).json()) as { state: { remaining: number } };
    expect(body.state.remaining).toBe(2);
  });

  it("resets a key", async () => {
    for (let i = 0; i < 3; i++) await hit("192.0.2.71");
    expect((await hit("192.0.2.71")).status).toBe(429);
    expect((await admin("state?rule=adm-window&key=192.0.2.71", { method: "DELETE" })).status).toBe(200);
    expect((await hit("192.0.2.71")).status).toBe(200);
  });

  it("reads and resets a client's key from its address as typed, grouped as the rule groups it", async () => {
    await hit("2001:db8:abcd:12ff::1");
    const typed = (await (await admin(`state?rule=adm-window&key=${encodeURIComponent("2001:DB8:abcd:12ff::9")}`)).json()) as { key: string; state: { remaining: number } };
    expect(typed).toMatchObject({ key: "2001:db8:abcd:1200::/56", state: { remaining: 2 } });
    await hit("192.0.2.73");
    const mapped = (await (await admin(`state?rule=adm-window&key=${encodeURIComponent("::ffff:192.0.2.73")}`)).json()) as { key: string; state: { remaining: number } };
    expect(mapped).toMatchObject({ key: "192.0.2.73", state: { remaining: 2 } });
  });

  it("answers 504 to a state read the key's object does not answer within the rule's timeout, rather than wait on it", async () => {
    let answered: Promise<unknown> | undefined;
    // The real objects, each peek answered only after the checks below: an object far behind on its queue.
    const slowPeeks = heldCalls("peek", (answer) => void (answered = answer));
    const slowRule = [{ name: "adm-slow", limit: 3, period: "1m", timeout: "100ms" }];
    const started = Date.now();
    const res = await send(new Request("http://floodgate.test/__floodgate/state?rule=adm-slow&key=192.0.2.80", { headers: { Authorization: `Bearer ${TOKEN}` } }), { rules: slowRule, ADMIN_TOKEN: TOKEN, LIMITER: slowPeeks.namespace });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual({ type: "about:blank", title: "Gateway Timeout", status: 504, detail: "the key's object did not answer within the rule's timeout (100ms); try again" });
    slowPeeks.answer();
    await answered;
  });

  it("answers 502 problem+json to a state read or a reset its key's object fails, naming the object's error", async () => {
    const failing = delayedCalls(["peek", "reset"], () => Promise.reject(new Error("object exploded")));
    const rules = [{ name: "adm-failing", limit: 3, period: "1m" }];
    const call = (method: string) =>
      send(new Request("http://floodgate.test/__floodgate/state?rule=adm-failing&key=192.0.2.82", { method, headers: { Authorization: `Bearer ${TOKEN}` } }), { rules, ADMIN_TOKEN: TOKEN, LIMITER: failing });
    const [read, reset] = [await call("GET"), await call("DELETE")];
    expect(read.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await read.json()).toEqual({ type: "about:blank", title: "Bad Gateway", status: 502, detail: "the key's object failed (object exploded); try again" });
    expect(reset.status).toBe(502);
  });

  it("answers 504 to a reset the key's object does not take within the rule's timeout, rather than wait on it", async () => {
    let answered: Promise<unknown> | undefined;
    const slowResets = heldCalls("reset", (answer) => void (answered = answer));
    const slowRule = [{ name: "adm-slow-reset", limit: 3, period: "1m", timeout: "100ms" }];
    const started = Date.now();
    const res = await send(new Request("http://floodgate.test/__floodgate/state?rule=adm-slow-reset&key=192.0.2.81", { method: "DELETE", headers: { Authorization: `Bearer ${TOKEN}` } }), { rules: slowRule, ADMIN_TOKEN: TOKEN, LIMITER: slowResets.namespace });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(res.status).toBe(504);
    expect(((await res.json()) as { detail: string }).detail).toBe("the key's object did not answer within the rule's timeout (100ms); the reset may still be applied: read the key's state, or reset it again");
    slowResets.answer();
    await answered;
  });

  it("answers 400 to a state call without rule and key, or with either empty, and 404 to an unknown rule", async () => {
    expect((await admin("state?rule=adm-window")).status).toBe(400);
    expect((await admin("state?rule=adm-window&key=")).status).toBe(400);
    expect((await admin("state?rule=adm-window&key=", { method: "DELETE" })).status).toBe(400);
    expect((await admin("state?rule=&key=x")).status).toBe(400);
    expect((await admin("state?rule=nope&key=x")).status).toBe(404);
  });

  it("answers 400 to a key the rule could never build, saying how to write it, and resets nothing", async () => {
    for (let i = 0; i < 3; i++) await send(new Request("http://floodgate.test/api/x", { headers: { "CF-Connecting-IP": "192.0.2.76", "x-api-key": "a|b" } }), { rules, ADMIN_TOKEN: TOKEN });
    const raw = await admin(`state?rule=adm-bucket&key=${encodeURIComponent("192.0.2.76|a|b")}`, { method: "DELETE" });
    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { detail: string }).detail).toMatch(/^key: the rule's key has 2 parts \(ip, header:x-api-key\) joined by "\|", this one 3; a "\|" inside a value is written %7C/);
    const escaped = (await (await admin(`state?rule=adm-bucket&key=${encodeURIComponent("192.0.2.76|a%7Cb")}`)).json()) as { state: { remaining: number } };
    expect(escaped.state.remaining).toBe(5);
  });

  it("answers 400 to a state call naming its rule or key twice", async () => {
    expect((await admin("state?rule=adm-window&rule=adm-bucket&key=192.0.2.77")).status).toBe(400);
    expect((await admin("state?rule=adm-window&key=192.0.2.77&key=192.0.2.78", { method: "DELETE" })).status).toBe(400);
  });

  it("marks every answer of the API no-store and nosniff: rules, state and counters are kept by no cache, read as no other type", async () => {
    for (const path of ["rules", "metrics", "state?rule=adm-window&key=192.0.2.79", "state?rule=adm-window&key=%25", "state?rule=nope&key=a", "unknown"]) {
      for (const answer of [await admin(path), await admin(path, { method: "HEAD" })]) {
        expect(answer.headers.get("Cache-Control"), path).toBe("no-store");
        expect(answer.headers.get("X-Content-Type-Options"), path).toBe("nosniff");
      }
    }
  });

  it("keeps an invalid configuration from whoever lacks the token, and tells the admin", async () => {
    const broken = [{ name: "adm-broken", limit: 3, period: "ten" }];
    const call = (path: string, headers: Record<string, string> = {}) => send(new Request(`http://floodgate.test/__floodgate/${path}`, { headers }), { rules: broken, ADMIN_TOKEN: TOKEN });
    const [anonymous, page, signedIn] = await Promise.all([call("metrics"), call(""), call("rules", { Authorization: `Bearer ${TOKEN}` })]);
    const withoutToken = await send(new Request("http://floodgate.test/__floodgate/rules"), { rules: broken });

    expect([anonymous.status, page.status, withoutToken.status]).toEqual([401, 200, 404]);
    expect(await anonymous.text()).not.toContain("adm-broken");
    expect(signedIn.status).toBe(500);
    expect(signedIn.headers.get("Cache-Control")).toBe("no-store");
    expect(((await signedIn.json()) as { detail: string }).detail).toMatch(/^rules\[0\] \("adm-broken"\)\.period/);
  });

  it("exports this isolate's counters and histograms in the Prometheus text format", async () => {
    await hit("192.0.2.72");
    const res = await admin("metrics");
    expect(res.headers.get("Content-Type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toMatch(/^# TYPE floodgate_decisions_total counter$/m);
    expect(text).toMatch(/^floodgate_decisions_total\{decision="allowed",rule="adm-window"\} \d+$/m);
    expect(text).toMatch(/^floodgate_durable_object_calls_total\{method="decide"\} \d+$/m);
    expect(text).toMatch(/^# TYPE floodgate_object_wait_seconds histogram$/m);
    expect(text).toMatch(/^floodgate_object_wait_seconds_count\{mode="strict",rule="adm-window"\} \d+$/m);
    // A sample's value is a float in Go's syntax, as Prometheus parses it: a histogram's sum has a fraction.
    for (const line of text.trim().split("\n")) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? -?\d+(\.\d+)?(e[+-]?\d+)?)$/);
  });

  it("exports every rule's decision series and the counters without labels from the start, at 0", () => {
    const fresh = new Metrics().render([{ name: "never-used", dryRun: true }]);
    expect(fresh).toMatch(/^floodgate_decisions_total\{decision="allowed",rule="never-used"\} 0$/m);
    expect(fresh).toMatch(/^floodgate_decisions_total\{decision="denied",rule="never-used"\} 0$/m);
    expect(fresh).toMatch(/^floodgate_decisions_total\{decision="dry_run_denied",rule="never-used"\} 0$/m);
    expect(fresh).toMatch(/^floodgate_ip_refusals_total 0$/m);
    expect(fresh).toMatch(/^floodgate_key_evictions_total 0$/m);
    expect(fresh).not.toMatch(/decision="unlimited"/);
  });

  it("exports the admin refusals counter, which has no labels, from the start, at 0", () => {
    expect(new Metrics().render([])).toMatch(/^floodgate_admin_refusals_total 0$/m);
  });

  it("exports the unlimited series, at 0, of a rule whose overrides leave a key unlimited", () => {
    const [rule] = parseConfig([{ name: "with-free-key", key: "header:x-api-key", limit: 1, period: "1m", overrides: [{ keys: ["k"], unlimited: true }] }]).rules;
    expect(new Metrics().render([rule!])).toMatch(/^floodgate_decisions_total\{decision="unlimited",rule="with-free-key"\} 0$/m);
  });

  it("exports a configured rule's decision series through the admin API before it decides anything", async () => {
    const text = await (await admin("metrics")).text();
    expect(text).toMatch(/^floodgate_decisions_total\{decision="denied",rule="adm-bucket"\} \d+$/m);
  });

  it("answers HEAD on every GET call as GET, with its headers, and 401 without the token", async () => {
    for (const path of ["rules", "metrics", "state?rule=adm-window&key=192.0.2.74"]) {
      const [head, get] = [await admin(path, { method: "HEAD" }), await admin(path)];
      expect(head.status, path).toBe(200);
      expect(head.headers.get("Content-Type"), path).toBe(get.headers.get("Content-Type"));
      expect((await admin(path, { method: "HEAD" }, "wrong")).status, path).toBe(401);
    }
  });

  it("logs why when ADMIN_TOKEN holds what no bearer header can carry, and answers the caller the same 401 as any", async () => {
    const lines: Record<string, unknown>[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>));
    for (const token of ["two words", "token\n", " padded"]) {
      const response = await send(new Request("http://floodgate.test/__floodgate/rules", { headers: { Authorization: `Bearer ${token.trim()}` } }), { rules, ADMIN_TOKEN: token });
      expect(response.status, JSON.stringify(token)).toBe(401);
    }
    vi.restoreAllMocks();
    expect(lines.filter((l) => l.kind === "config" && String(l.message).startsWith("ADMIN_TOKEN: holds whitespace, control or non-ASCII characters"))).toHaveLength(3);
  });

  it.each(["unknown", "constructor", "__proto__"])("answers 404 to the unknown admin path %s", async (path) => {
    expect((await admin(path)).status).toBe(404);
  });

  it.each([
    ["POST", "state?rule=adm-window&key=192.0.2.77", "GET, HEAD, DELETE"],
    ["PUT", "rules", "GET, HEAD"],
    ["DELETE", "metrics", "GET, HEAD"],
    ["POST", "", "GET, HEAD"],
  ])("answers %s on /__floodgate/%s 405 problem+json with the methods it takes", async (method, path, allow) => {
    const response = await admin(path, { method, body: "{not json" });
    expect(response.status).toBe(405);
    expect(response.headers.get("Allow")).toBe(allow);
    expect(response.headers.get("Content-Type")).toBe("application/problem+json");
    expect(((await response.json()) as { detail: string }).detail).toBe(`${method} is not a method of /__floodgate/${path.split("?")[0]}; it takes ${allow}`);
    expect((await admin(path, { method }, "wrong")).status).toBe(401);
  });

  it.each(["/__FLOODGATE/rules", "/%5f%5ffloodgate/rules", "/__floodgate", "/__floodgate%2frules", "//__floodgate/rules"])(
    "answers a mistyped admin call %s itself, never forwarding the admin's token to the origin",
    async (path) => {
      const signedIn = await send(new Request(`http://floodgate.test${path}`, { headers: { Authorization: `Bearer ${TOKEN}` } }), { rules, ADMIN_TOKEN: TOKEN });
      const anonymous = await send(new Request(`http://floodgate.test${path}`), { rules, ADMIN_TOKEN: TOKEN });
      expect([signedIn.status, anonymous.status]).toEqual([404, 401]);
      expect(signedIn.headers.get("Content-Type")).toBe("application/problem+json");
    },
  );
});
