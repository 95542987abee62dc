/** floodgate's Worker: validates the configuration, answers the admin API, enforces the rules, proxies. */
import { ADMIN_PREFIX, handleAdmin } from "./admin/admin";
import { loadSettings } from "./config";
import { ConfigError } from "./config/errors";
import type { Env } from "./env";
import { setCapacity } from "./fast";
import { enforce } from "./gate/enforce";
import { demoOrigin } from "./http/demo-origin";
import { HttpProblem, invalidConfig, rateLimited } from "./http/problem";
import { forward } from "./http/proxy";
import { longestWait, mostRestrictive, rateLimitHeaders } from "./http/rate-limit-headers";
import { metrics } from "./metrics/metrics";

export { RateLimiter } from "./durable-object/rate-limiter";

export default {
  async fetch(request, env, ctx): Promise<Response> {
    try {
      return await handle(request, env, ctx);
    } catch (error) {
      if (error instanceof HttpProblem) return error.toResponse();
      if (error instanceof ConfigError) return invalidConfig(error.message).toResponse();
      metrics.count("floodgate_errors_total", { kind: "internal" });
      console.error("floodgate: unexpected error", error);
      return new HttpProblem({
        type: "internal",
        status: 500,
        title: "Internal Error",
        detail: "floodgate failed to handle this request; the error is logged.",
      }).toResponse();
    }
  },
} satisfies ExportedHandler<Env>;

async function handle(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const settings = loadSettings(env);
  setCapacity(settings.fastMaxKeys);
  const url = new URL(request.url);
  if (url.pathname.startsWith(ADMIN_PREFIX)) return handleAdmin(request, env, settings);
  const verdict = await enforce(request, url, settings.rules, env, ctx);
  const now = Date.now();
  if (!verdict.allowed) {
    const denying = verdict.entries.filter((e) => !e.decision.allowed);
    const shown = longestWait(denying)!;
    const names = denying.map((e) => e.rule.name);
    const detail = `Rate limit exceeded for ${names.join(", ")}; retry in ${Math.max(1, Math.ceil(shown.decision.retryAfter / 1000))} s.`;
    return rateLimited(names, detail).toResponse(rateLimitHeaders(shown.rule, shown.decision, now));
  }
  const response = settings.origin.demo ? await demoOrigin(request) : await forward(request, url, settings.origin.url);
  const shown = mostRestrictive(verdict.entries);
  if (shown) {
    const headers = rateLimitHeaders(shown.rule, shown.decision, now);
    for (const name in headers) response.headers.set(name, headers[name]!);
  }
  return response;
}
