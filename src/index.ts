/** floodgate's Worker: the proxy (validates the configuration, answers the admin API, checks the rules, proxies) and the Floodgate service binding. */
import { handleAdmin, isAdminPath } from "./admin/admin";
import { denyListOnly, hashKeyOf, loadSettings, requireLimiter, type Settings } from "./config";
import { ConfigError } from "./config/errors";
import type { Env } from "./env";
import { setCapacity } from "./fast";
import { check, refusal, refused } from "./gate/check";
import { workerContext } from "./limiter";
import { demoOrigin } from "./http/demo-origin";
import { failureResponse } from "./http/failure";
import { AnswerLost, HttpProblem, notFound } from "./http/problem";
import { sendHolding } from "./http/in-flight";
import { forward, withoutConnectionOptions } from "./http/proxy";
import { withRateLimitHeaders } from "./http/rate-limit-headers";
import { warnOnce } from "./metrics/log";
import { clientAddress, keyedHeaders } from "./routing/key";

export { Floodgate } from "./binding/floodgate";
export { RateLimiter } from "./durable-object/rate-limiter";

export default {
  async fetch(request, env, ctx): Promise<Response> {
    return handle(request, env, ctx).catch(failureResponse);
  },
} satisfies ExportedHandler<Env>;

async function handle(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const url = new URL(request.url);
  const admin = isAdminPath(url.pathname);
  const ip = clientAddress(request);
  let settings: Settings;
  try {
    settings = loadSettings(env);
    requireLimiter(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // DENY_IPS comes before anything else, an invalid configuration elsewhere included.
    if (refused(ip, { allow: null, deny: denyListOnly(env) })) return refusal(ip, hashKeyOf(env), (promise) => ctx.waitUntil(promise));
    // An invalid configuration is the admin's to read once signed in; to anyone else the admin API answers as ever.
    if (admin) return handleAdmin(request, env, () => { throw error; });
    throw error;
  }
  setCapacity(settings.fastMaxKeys);
  warnOnce(settings.warnings);
  // DENY_IPS comes before anything else, the admin API included.
  if (refused(ip, settings.ips)) return refusal(ip, settings.hashKey, (promise) => ctx.waitUntil(promise));
  if (admin) return handleAdmin(request, env, () => settings);
  const { origin } = settings;
  // Only the proxy needs an origin: the service binding and the admin API work without one.
  if (origin instanceof ConfigError) throw origin;
  // A binding-only deployment is no proxy: nothing is counted, nothing forwarded, and nothing said of what exists.
  if (origin.kind === "none") return notFound().toResponse();
  const checked = await check(request, url, settings, workerContext(env.LIMITER, ctx, settings));
  if (checked.response) return checked.response;
  const send = () => (origin.kind === "demo" ? demoOrigin(request) : forward(request, url, origin.url, keyedHeaders(settings.rules)));
  // An origin that cannot be reached is answered with the 502 problem, which says the key's standing too: its units were spent.
  let ended = "answered" as "answered" | "unreached" | "lost";
  const response = await sendHolding(checked.release, request.signal, (promise) => ctx.waitUntil(promise), send).catch((error: unknown) => {
    if (!(error instanceof HttpProblem)) throw error;
    ended = error instanceof AnswerLost ? "lost" : "unreached";
    return error.toResponse();
  });
  // A rule that counts by response (its `count`) learns how the request ended: the origin's status, or the 502 of none;
  // one that reads its cost from the response (`responseCost`), the origin's headers (with none, it stays at its cost).
  // An origin whose answer was lost was reached, and how it ended is unknown: every rule keeps it counted at its cost.
  if (checked.settle && ended !== "lost") ctx.waitUntil(ended === "unreached" ? checked.settle(response.status) : checked.settle(response.status, response.headers));
  // Only now, once settle has read them: a cost header the origin names in Connection is still its cost.
  return withRateLimitHeaders(withoutConnectionOptions(response), checked.headers);
}
