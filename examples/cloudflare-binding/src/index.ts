/** A Worker written for Cloudflare's rate-limiting binding. It runs unchanged against floodgate: only wrangler.toml differs. */
interface Env {
  LIMITER: RateLimit;
}

export default {
  async fetch(request, env): Promise<Response> {
    const key = new URL(request.url).searchParams.get("user") || "anonymous";
    const { success } = await env.LIMITER.limit({ key });
    if (!success) return new Response(`429 Failure: rate limit exceeded for ${key}`, { status: 429 });
    return new Response("Success!");
  },
} satisfies ExportedHandler<Env>;
