/** A Worker that asks floodgate, through a service binding, before doing its own work: `limit` for a key it chooses, `check` for a whole request. */
import type { Floodgate } from "floodgate";

interface Env {
  /** `[[services]]` in wrangler.toml, floodgate's `Floodgate` entrypoint; its `props.rule` is the rule `limit` uses when a call names none */
  FLOODGATE: Service<Floodgate>;
}

export default {
  async fetch(request, env): Promise<Response> {
    const url = new URL(request.url);

    // limit: a key this Worker chooses (here the account being logged into), under the binding's rule.
    if (url.pathname === "/login" && request.method === "POST") {
      const account = url.searchParams.get("account") ?? "";
      if (!account) return Response.json({ error: "?account= is required" }, { status: 400 });
      const { success, remaining, retryAfter } = await env.FLOODGATE.limit({ key: account });
      if (!success) {
        const seconds = Math.max(1, Math.ceil(retryAfter / 1000));
        return Response.json({ error: "too many attempts", retryAfterSeconds: seconds }, { status: 429, headers: { "Retry-After": String(seconds) } });
      }
      return Response.json({ ok: true, remaining });
    }

    // check: every floodgate rule whose match fits this request, exactly as the proxy would apply them,
    // without proxying: floodgate's own 429 when denied, else the headers to add to this Worker's answer.
    if (url.pathname.startsWith("/api/")) {
      // A Request sent over RPC hands its body to the callee: floodgate reads only the method, URL and
      // headers, so it is sent a copy without the body, and this Worker keeps its own to read.
      const { allowed, headers, response } = await env.FLOODGATE.check(new Request(request, { body: null }));
      if (!allowed) return response;
      return Response.json({ hello: url.pathname }, { headers });
    }

    return new Response("not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;
