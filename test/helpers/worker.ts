// Drives the real Worker (and through it the real RateLimiter objects) with chosen bindings.
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { inject } from "vitest";
import worker from "../../src/index";
import type { Env } from "../../src/env";

/** The URL of the test origin (a real Node server) for paths under `/<tag>/`. */
export function originUrl(): string {
  return `http://127.0.0.1:${inject("originPort")}`;
}

/**
 * Sends one request through floodgate with the given rules and bindings, and returns its response
 * as soon as there is one; `settled` resolves once its `waitUntil` work (syncs, refunds) is done.
 */
export async function dispatch(
  request: Request,
  bindings: Partial<Env> & { rules?: unknown } = {},
): Promise<{ response: Response; settled: Promise<void> }> {
  const { rules, ...rest } = bindings;
  const testEnv: Env = {
    ...(env as unknown as Env),
    ORIGIN_URL: originUrl(),
    RATE_LIMIT_RULES: rules === undefined ? "[]" : typeof rules === "string" ? rules : JSON.stringify(rules),
    ...rest,
  };
  const ctx = createExecutionContext();
  // The runtime delivers every incoming request in "manual" redirect mode, as Workers documents.
  const incoming = request.redirect === "manual" ? request : new Request(request, { redirect: "manual" });
  const response = await worker.fetch(incoming as Request<unknown, IncomingRequestCfProperties>, testEnv, ctx);
  return { response, settled: waitOnExecutionContext(ctx) };
}

/** {@link dispatch}, waiting for the request's `waitUntil` work as the runtime would before moving on. */
export async function send(request: Request, bindings: Partial<Env> & { rules?: unknown } = {}): Promise<Response> {
  const { response, settled } = await dispatch(request, bindings);
  await settled;
  return response;
}

/** The statuses of `count` requests sent one after another through floodgate, each waited out as {@link send} does. */
export async function statuses(count: number, request: () => Request, bindings: Partial<Env> & { rules?: unknown } = {}): Promise<number[]> {
  const out = [];
  for (let i = 0; i < count; i++) out.push((await send(request(), bindings)).status);
  return out;
}

/** What the origin recorded for requests under `/<tag>/`. */
export async function originLog(tag: string): Promise<{ method: string; url: string; headers: Record<string, string>; lines: Record<string, string[]>; bodyBytes: number; bodySha256: string; chunks: number }[]> {
  return (await fetch(`${originUrl()}/__origin/log?tag=${tag}`)).json();
}

/** Whether the RateLimiter object of that name has forwarded syncs as a relay (a rule's `aggregate`). */
export function isRelay(name: string): Promise<boolean> {
  const namespace = (env as unknown as Env).LIMITER;
  return runInDurableObject(namespace.get(namespace.idFromName(name)), (object) => (object as unknown as { relayed?: unknown }).relayed !== undefined);
}
