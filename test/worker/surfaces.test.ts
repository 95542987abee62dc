// The four doors to one engine (the proxy, the binding's check, createGate, the Hono middleware) answer a request alike.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Floodgate } from "../../src/binding/floodgate";
import type { Env } from "../../src/env";
import { rateLimit } from "../../src/hono";
import { createGate, type Checked, type RuleSetInput } from "../../src/lib";
import { frozenStart } from "../helpers/clock";
import { dispatch, originUrl } from "../helpers/worker";

/** What a client is told: the status, the rate-limit fields, and the problem of an answer floodgate made itself. */
interface Told {
  status: number;
  fields: Record<string, string>;
  problem?: unknown;
}

type Vars = { RATE_LIMIT_HEADERS?: string; LEGACY_HEADERS?: string };
type Rule = { name: string; key: string; limit: number; period: string } & Record<string, unknown>;
type Surface = (rules: Rule[], vars: Vars, request: Request) => Promise<Told>;

async function told(response: Response, own: boolean): Promise<Told> {
  const fields = Object.fromEntries([...response.headers].filter(([name]) => /^(ratelimit|x-ratelimit|retry-after)/i.test(name)));
  const body = await response.text();
  return { status: response.status, fields, ...(own ? { problem: JSON.parse(body) } : {}) };
}

function fromCheck(checked: Checked): Promise<Told> {
  if (checked.allowed) return Promise.resolve({ status: 200, fields: Object.fromEntries(Object.entries(checked.headers).map(([k, v]) => [k.toLowerCase(), v])) });
  return told(checked.response, true);
}

const SURFACES: Record<string, Surface> = {
  async proxy(rules, vars, request) {
    const { response, settled } = await dispatch(request, { rules, ...vars });
    const answer = await told(response, response.headers.get("Content-Type") === "application/problem+json");
    await settled;
    return answer;
  },
  async binding(rules, vars, request) {
    const ctx = createExecutionContext();
    const bound: Env = { ...(env as unknown as Env), ORIGIN_URL: originUrl(), RATE_LIMIT_RULES: JSON.stringify(rules), ...vars };
    const answer = await fromCheck(await new Floodgate(ctx as never, bound).check(request));
    await waitOnExecutionContext(ctx);
    return answer;
  },
  async gate(rules, vars, request) {
    const ctx = createExecutionContext();
    const options = { ...(vars.RATE_LIMIT_HEADERS ? { headers: vars.RATE_LIMIT_HEADERS as never } : {}), ...(vars.LEGACY_HEADERS ? { legacyHeaders: vars.LEGACY_HEADERS === "true" } : {}) };
    const answer = await fromCheck(await createGate((env as unknown as Env).LIMITER, rules as RuleSetInput, options).check(request, ctx));
    await waitOnExecutionContext(ctx);
    return answer;
  },
  async hono(rules, vars, request) {
    const app = new Hono<{ Bindings: Env }>();
    const options = { ...(vars.RATE_LIMIT_HEADERS ? { headers: vars.RATE_LIMIT_HEADERS as never } : {}), ...(vars.LEGACY_HEADERS ? { legacyHeaders: vars.LEGACY_HEADERS === "true" } : {}) };
    // One middleware per rule, in rule order, each keyed by the header the rules name.
    for (const { key: _key, ...rule } of rules) app.use("*", rateLimit({ binding: "LIMITER", rule: rule as never, key: (c) => c.req.header("x-k"), ...options }));
    app.all("*", (c) => c.text("ok"));
    const ctx = createExecutionContext();
    const response = await app.request(request, undefined, env, ctx);
    const answer = await told(response, response.status !== 200);
    await waitOnExecutionContext(ctx);
    return answer;
  },
};

/** `count` requests of one client through `surface`, `stepMs` apart on the frozen clock. */
async function sequence(surface: string, tag: string, rules: Rule[], vars: Vars, count: number, stepMs: number): Promise<Told[]> {
  const answers: Told[] = [];
  for (let i = 0; i < count; i++) {
    const request = new Request(`http://floodgate.test/${tag}/${i}`, { headers: { "x-k": `${tag}-${surface}` } });
    answers.push(await SURFACES[surface]!(rules, vars, request));
    vi.setSystemTime(Date.now() + stepMs);
  }
  return answers;
}

const FORMS: Vars[] = [{}, { RATE_LIMIT_HEADERS: "draft-7" }, { RATE_LIMIT_HEADERS: "draft-6", LEGACY_HEADERS: "false" }, { RATE_LIMIT_HEADERS: "none" }];

const SCENARIOS: [string, (tag: string) => Rule[], number, number][] = [
  ["two rules, the most restrictive shown", (tag) => [
    { name: `${tag}-window`, key: "header:x-k", limit: 4, period: "1m" },
    { name: `${tag}-bucket`, key: "header:x-k", algorithm: "token-bucket", limit: 6, period: "1m", burst: 3 },
  ], 5, 1_000],
  ["a dry run beside an enforced rule", (tag) => [
    { name: `${tag}-dry`, key: "header:x-k", limit: 1, period: "1m", dryRun: true },
    { name: `${tag}-enforced`, key: "header:x-k", limit: 3, period: "1h" },
  ], 5, 1_000],
  ["a block", (tag) => [{ name: `${tag}-block`, key: "header:x-k", limit: 2, period: "10s", block: "5m" }], 4, 1_000],
  // A unit every 100 ms, a request every 40 ms: past the first, each is held until it conforms (a real timer), then denied.
  ["a gcra hold", (tag) => [{ name: `${tag}-gcra`, key: "header:x-k", algorithm: "gcra", limit: 10, period: "1s", burst: 1, delay: 0 }], 4, 40],
];

describe("the proxy, the binding's check, createGate and the Hono middleware", () => {
  afterEach(() => void vi.useRealTimers());

  describe.each(SCENARIOS)("with %s", (scenario, rulesOf, count, stepMs) => {
    it.each(FORMS.map((vars, i) => [JSON.stringify(vars), vars, i] as const))("send the same status, fields and problem under %s", async (_, vars, i) => {
      const tag = `surf-${SCENARIOS.findIndex(([name]) => name === scenario)}-${i}`;
      const rules = rulesOf(tag);
      const answers: Record<string, Told[]> = {};
      for (const surface of Object.keys(SURFACES)) {
        vi.useFakeTimers({ toFake: ["Date"] });
        vi.setSystemTime(frozenStart());
        answers[surface] = await sequence(surface, tag, rules, vars, count, stepMs);
        vi.useRealTimers();
      }
      for (const surface of ["binding", "gate", "hono"]) expect({ surface, told: answers[surface] }).toEqual({ surface, told: answers.proxy });
    });
  });
});
