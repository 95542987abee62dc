/** A Hono app limited by floodgate's middleware and library, with the RateLimiter Durable Object in this Worker. */
import { RateLimiter, ipKey, limiter } from "floodgate";
import { rateLimit } from "floodgate/hono";
import { Hono } from "hono";

// The Durable Object class floodgate decides with: export it, and bind it as LIMITER (wrangler.toml).
export { RateLimiter };

type Env = { Bindings: { LIMITER: DurableObjectNamespace<RateLimiter> } };

const app = new Hono<Env>()
  // 5 requests a minute per API key on /api/*; a request without one shares the key "#none".
  .use("/api/*", rateLimit({ binding: "LIMITER", rule: { name: "api", limit: 5, period: "1m" }, key: (c) => c.req.header("x-api-key") }))
  // What the middleware decided for this request: { success, limit, remaining, reset, retryAfter, rule }.
  .get("/api/quota", (c) => c.json(c.get("rateLimit")))
  // The library without the middleware: 3 attempts, refilled one every 20 s, per client address
  // (an IPv6 client by its /56, as the proxy keys it: the addresses of one client's network share one quota).
  .post("/login", async (c) => {
    const attempts = limiter(c.env.LIMITER, { name: "login", algorithm: "token-bucket", limit: 3, period: "1m" });
    const result = await attempts.limit(ipKey(c.req.header("cf-connecting-ip")) ?? "unknown", { ctx: c.executionCtx });
    if (!result.success) return c.json({ error: "too many attempts", retryAfterMs: result.retryAfter }, 429);
    return c.json({ ok: true, remaining: result.remaining });
  })
  // A budget of 1,000 tokens an hour per API key, whose cost is known only once the model has
  // answered: one token up front (some budget must be left), the rest charged after. A stand-in
  // model here "uses" the tokens the request asks for.
  .use("/complete", rateLimit({ binding: "LIMITER", rule: { name: "tokens", limit: 1_000, period: "1h" }, key: (c) => c.req.header("x-api-key") }))
  .post("/complete", async (c) => {
    const used = Number(c.req.query("tokens") ?? 1);
    // charge takes whole units and rejects anything else, in the background where no one sees it: refuse such a count here.
    if (!Number.isSafeInteger(used) || used < 0) return c.json({ error: "?tokens= must be a whole number, 0 or more" }, 400);
    c.executionCtx.waitUntil(c.get("rateLimit").charge!(used - 1));
    return c.json({ used });
  });

export default app;
