import { describe, expect, it } from "vitest";
import { dispatch, originLog, send, statuses } from "../helpers/worker";

const rules = [{ name: "proxy-ip", key: "ip", limit: 1000, period: "1m" }];

/** A body sent in several chunks, so the test can see that it arrived streamed and intact. */
function chunkedBody(chunks: number, size: number): { stream: ReadableStream<Uint8Array>; bytes: number } {
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === chunks) return controller.close();
      controller.enqueue(new Uint8Array(size).fill(sent++ % 251));
    },
  });
  return { stream, bytes: chunks * size };
}

async function sha256(chunks: number, size: number): Promise<string> {
  const all = new Uint8Array(chunks * size);
  for (let i = 0; i < chunks; i++) all.fill(i % 251, i * size, (i + 1) * size);
  const digest = await crypto.subtle.digest("SHA-256", all);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("proxying an allowed request", () => {
  it("delivers method, path, query and headers to the origin", async () => {
    await send(
      new Request("http://floodgate.test/forward-1/items/42?q=a%20b&x=1&x=2", {
        method: "PATCH",
        headers: { "x-custom": "kept", authorization: "Bearer api", "CF-Connecting-IP": "203.0.113.5" },
        body: "{}",
      }),
      { rules },
    );
    const [seen] = await originLog("forward-1");
    expect(seen).toMatchObject({ method: "PATCH", url: "/forward-1/items/42?q=a%20b&x=1&x=2" });
    expect(seen?.headers).toMatchObject({ "x-custom": "kept", authorization: "Bearer api" });
  });

  it("streams a large body to the origin intact", async () => {
    const { stream, bytes } = chunkedBody(64, 16 * 1024);
    await send(new Request("http://floodgate.test/forward-2/upload", { method: "POST", body: stream }), { rules });
    const [seen] = await originLog("forward-2");
    expect(seen?.bodyBytes).toBe(bytes);
    expect(seen?.bodySha256).toBe(await sha256(64, 16 * 1024));
    expect(seen?.chunks).toBeGreaterThan(1);
  });

  it("delivers an upload that expects 100-continue, as curl sends past 1 KB, whole and once", async () => {
    const body = "x".repeat(4096);
    const response = await send(new Request("http://floodgate.test/forward-expect/upload", { method: "POST", headers: { expect: "100-continue" }, body }), { rules });
    expect(response.status).toBe(200);
    const seen = await originLog("forward-expect");
    expect(seen.map((r) => r.bodyBytes)).toEqual([4096]);
  });

  it("opens a WebSocket to the origin for an allowed upgrade, with the rate-limit headers on the 101", async () => {
    const upgrade = () => new Request("http://floodgate.test/forward-ws/socket", { headers: { Upgrade: "websocket", Connection: "Upgrade", "CF-Connecting-IP": "192.0.2.90" } });
    const limited = [{ name: "ws-per-ip", key: "ip", limit: 1, period: "1m" }];
    const response = await send(upgrade(), { rules: limited });
    expect(response.status).toBe(101);
    expect(response.headers.get("RateLimit-Policy")).toBe('"ws-per-ip";q=1;w=60');
    const socket = response.webSocket!;
    socket.accept();
    const echoed = new Promise<string>((resolve) => socket.addEventListener("message", (event) => resolve(String(event.data)), { once: true }));
    socket.send("hello");
    expect(await echoed).toBe("echo:hello");
    socket.close();

    expect((await send(upgrade(), { rules: limited })).status).toBe(429);
    expect(await originLog("forward-ws")).toHaveLength(1);
  });

  it("holds a concurrency slot while a WebSocket is open, relaying its messages, and gives it back when it closes", async () => {
    const rules = [{ name: "ws-open", key: "ip", algorithm: "concurrency", limit: 1 }];
    const upgrade = () => new Request("http://floodgate.test/forward-ws-slot/socket", { headers: { Upgrade: "websocket", "CF-Connecting-IP": "192.0.2.91" } });
    // The slot's release waits in waitUntil until the socket closes: the response comes first.
    const { response: first, settled } = await dispatch(upgrade(), { rules });
    expect(first.status).toBe(101);
    const socket = first.webSocket!;
    socket.accept();
    const echoed = new Promise<string>((resolve) => socket.addEventListener("message", (event) => resolve(String(event.data)), { once: true }));
    socket.send("through");
    expect(await echoed).toBe("echo:through");
    const binary = new Promise<unknown>((resolve) => socket.addEventListener("message", (event) => resolve(event.data), { once: true }));
    socket.send(new Uint8Array([1, 2, 3]));
    const back = await binary;
    expect(typeof back).not.toBe("string");
    const bytes = new Uint8Array(back instanceof Blob ? await back.arrayBuffer() : (back as ArrayBuffer));
    expect([...bytes]).toEqual([..."echo:"].map((c) => c.charCodeAt(0)).concat([1, 2, 3]));
    expect((await send(upgrade(), { rules })).status).toBe(429);

    socket.close(1000, "done");
    await settled;
    const { response: again } = await dispatch(upgrade(), { rules });
    expect(again.status).toBe(101);
    again.webSocket!.accept();
    again.webSocket!.close(1000);
  });

  it("drops hop-by-hop headers and those the Connection header names", async () => {
    await send(
      new Request("http://floodgate.test/forward-3/", {
        headers: { connection: "x-private", "x-private": "secret", "keep-alive": "timeout=5", "proxy-authorization": "p", te: "trailers" },
      }),
      { rules },
    );
    const [seen] = await originLog("forward-3");
    expect(Object.keys(seen?.headers ?? {})).not.toContain("x-private");
    expect(Object.keys(seen?.headers ?? {})).not.toContain("proxy-authorization");
    expect(Object.keys(seen?.headers ?? {})).not.toContain("keep-alive");
  });

  it("drops from the origin's response the headers its Connection header names, as on the way in", async () => {
    const res = await send(new Request("http://floodgate.test/forward-3c/x?h=connection:x-hop-only&h=x-hop-only:internal&h=x-kept:1"), { rules });
    expect(res.status).toBe(200);
    expect(res.headers.has("x-hop-only")).toBe(false);
    expect(res.headers.get("x-kept")).toBe("1");
    expect(res.headers.get("RateLimit-Policy")).toBe('"proxy-ip";q=1000;w=60');
  });

  it("drops from the origin's response the hop-by-hop headers meant for floodgate's hop: Proxy-Connection, Proxy-Authenticate", async () => {
    const res = await send(new Request("http://floodgate.test/forward-3d/x?h=proxy-connection:keep-alive&h=proxy-authenticate:Basic%20realm%3D%22inner%22&h=x-kept:1"), { rules });
    expect(res.status).toBe(200);
    expect(res.headers.has("proxy-connection")).toBe(false);
    expect(res.headers.has("proxy-authenticate")).toBe(false);
    expect(res.headers.get("x-kept")).toBe("1");
  });

  it("proxies a request whose Connection header lists something that is not a header name", async () => {
    const res = await send(
      new Request("http://floodgate.test/forward-3b/", { headers: { connection: 'close, "x y", x-private', "x-private": "secret", "x-kept": "1" } }),
      { rules },
    );
    expect(res.status).toBe(200);
    const [seen] = await originLog("forward-3b");
    expect(seen?.headers).toMatchObject({ "x-kept": "1" });
    expect(Object.keys(seen?.headers ?? {})).not.toContain("x-private");
  });

  it("forwards a key's header sent twice as the one line it was counted under, so an origin reading the first line is never handed another key past its quota", async () => {
    const keyed = [{ name: "forward-dup", key: "header:x-api-key", limit: 2, period: "1m" }];
    // A client over its quota as "k-victim" adds a second line, a new one each time: the Fetch API reads "k-victim, junk-<i>", a fresh key.
    for (let i = 0; i < 4; i++) {
      const headers = new Headers([["x-api-key", "k-victim"], ["x-api-key", `junk-${i}`], ["CF-Connecting-IP", "198.51.100.61"]]);
      expect((await send(new Request(`http://floodgate.test/forward-dup/${i}`, { headers }), { rules: keyed })).status).toBe(200);
    }
    // The origin is sent what was counted: one line, never the bare "k-victim" that Go's Header.Get or nginx's $http_ would read from the first of two.
    for (const seen of await originLog("forward-dup")) expect(seen.lines["x-api-key"]).toEqual([seen.headers["x-api-key"]]);
  });

  it("forwards a header the rules do not key on as the client sent it, line by line", async () => {
    const headers = new Headers([["x-other", "a"], ["x-other", "b"], ["CF-Connecting-IP", "198.51.100.62"]]);
    await send(new Request("http://floodgate.test/forward-lines/x", { headers }), { rules: [{ name: "forward-lines", key: "header:x-api-key", limit: 5, period: "1m" }] });
    const [seen] = await originLog("forward-lines");
    expect(seen?.lines["x-other"]).toEqual(["a", "b"]);
  });

  it("sends each allowed request to the origin exactly once", async () => {
    for (let i = 0; i < 5; i++) await send(new Request(`http://floodgate.test/forward-4/${i}`), { rules });
    expect((await originLog("forward-4")).map((r) => r.url)).toEqual(["/forward-4/0", "/forward-4/1", "/forward-4/2", "/forward-4/3", "/forward-4/4"]);
  });

  it("returns the origin's response with the rate-limit headers added", async () => {
    const res = await send(new Request("http://floodgate.test/forward-5/", { headers: { "CF-Connecting-IP": "198.51.100.5" } }), {
      rules,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-origin")).toBe("yes");
    expect(await res.json()).toMatchObject({ ok: true });
    expect(res.headers.get("RateLimit-Policy")).toBe('"proxy-ip";q=1000;w=60');
    expect(res.headers.get("RateLimit")).toMatch(/^"proxy-ip";r=999;t=\d+$/);
  });

  it("replaces the rate-limit fields the origin sent with its own, each family whole", async () => {
    const own = ["RateLimit:\"origin\";r=7;t=3", "RateLimit-Policy:\"origin\";q=100;w=60", "RateLimit-Remaining:7", "X-RateLimit-Limit:100", "X-RateLimit-Remaining:7"];
    const res = await send(new Request(`http://floodgate.test/forward-own/x?${own.map((h) => `h=${encodeURIComponent(h)}`).join("&")}`, { headers: { "CF-Connecting-IP": "198.51.100.50" } }), { rules });
    expect(res.headers.get("RateLimit")).toMatch(/^"proxy-ip";r=999;t=\d+$/);
    expect(res.headers.get("RateLimit-Policy")).toBe('"proxy-ip";q=1000;w=60');
    expect(res.headers.get("RateLimit-Remaining")).toBeNull();
    expect([res.headers.get("X-RateLimit-Limit"), res.headers.get("X-RateLimit-Remaining")]).toEqual(["1000", "999"]);
  });

  it("replaces every X-RateLimit-* field the origin sent, not only the three it sends itself", async () => {
    const own = ["X-RateLimit-Used:7", "X-RateLimit-Resource:core", "X-RateLimit-Limit:100"];
    const res = await send(new Request(`http://floodgate.test/forward-own/w?${own.map((h) => `h=${encodeURIComponent(h)}`).join("&")}`, { headers: { "CF-Connecting-IP": "198.51.100.56" } }), { rules });
    expect([res.headers.get("X-RateLimit-Used"), res.headers.get("X-RateLimit-Resource"), res.headers.get("X-RateLimit-Limit")]).toEqual([null, null, "1000"]);
  });

  it.each([202, 301])("adds its fields to a %i whose Retry-After is a polling interval or a redirect's, not an origin's own limit", async (status) => {
    const res = await send(new Request(`http://floodgate.test/forward-own/v?status=${status}&h=${encodeURIComponent("Retry-After:5")}&h=${encodeURIComponent("Location:/jobs/1")}`, { headers: { "CF-Connecting-IP": "198.51.100.57" } }), { rules });
    expect([res.status, res.headers.get("Retry-After")]).toEqual([status, "5"]);
    expect(res.headers.get("RateLimit")).toMatch(/^"proxy-ip";r=\d+;t=\d+$/);
  });

  it("leaves the origin's fields of a family it does not send", async () => {
    const res = await send(new Request(`http://floodgate.test/forward-own/y?h=${encodeURIComponent("X-RateLimit-Remaining:7")}`, { headers: { "CF-Connecting-IP": "198.51.100.51" } }), { rules, LEGACY_HEADERS: "false" });
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("7");
    expect(res.headers.get("RateLimit")).toMatch(/^"proxy-ip";r=999/);
  });

  it.each([429, 503])("leaves an origin's own %i that says when to come back (Retry-After) as it is", async (status) => {
    const res = await send(new Request(`http://floodgate.test/forward-own/z?status=${status}&h=${encodeURIComponent("Retry-After:120")}`, { headers: { "CF-Connecting-IP": "198.51.100.52" } }), { rules });
    expect(res.status).toBe(status);
    expect(res.headers.get("Retry-After")).toBe("120");
    expect(res.headers.get("RateLimit")).toBeNull();
    expect(res.headers.get("X-RateLimit-Remaining")).toBeNull();
  });

  it("answers an origin it cannot reach with a 502 that carries the key's standing: the request's units were spent", async () => {
    const res = await send(new Request("http://floodgate.test/forward-down/x", { headers: { "CF-Connecting-IP": "198.51.100.53" } }), { rules, ORIGIN_URL: "http://127.0.0.1:1" });
    expect(res.status).toBe(502);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(res.headers.get("RateLimit")).toMatch(/^"proxy-ip";r=999;t=\d+$/);
  });

  it("answers an origin that sends 103 Early Hints with the 502 problem, as the runtime's fetch loses the final answer", async () => {
    const res = await send(new Request("http://floodgate.test/forward-hints/early-hints", { headers: { "CF-Connecting-IP": "198.51.100.54" } }), { rules });
    expect(res.status).toBe(502);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await originLog("forward-hints")).toHaveLength(1);
  });

  it("keeps a request whose origin sent 103 Early Hints counted, even by a rule that counts only successes: the origin was reached, and how it ended is lost", async () => {
    const successes = [{ name: "proxy-hints-count", key: "ip", limit: 2, period: "1h", count: "successful" }];
    const hinted = () => new Request("http://floodgate.test/forward-hints-count/early-hints", { headers: { "CF-Connecting-IP": "198.51.100.55" } });
    expect(await statuses(3, hinted, { rules: successes })).toEqual([502, 502, 429]);
    expect(await originLog("forward-hints-count")).toHaveLength(2);
  });

  it("passes the origin's redirects back instead of following them", async () => {
    const res = await send(new Request("http://floodgate.test/forward-6/redirect"), { rules });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/elsewhere");
  });

  it("passes redirects back when it forwards a copy without hop-by-hop headers", async () => {
    const res = await send(new Request("http://floodgate.test/forward-6/redirect", { headers: { "keep-alive": "timeout=5" } }), { rules });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/elsewhere");
  });

  it("keeps the configured origin whatever host, absolute form or path the request carries", async () => {
    await send(new Request("http://evil.example/forward-7/a/../b/%2F%2Fevil.example/c", { headers: { host: "evil.example" } }), {
      rules,
    });
    await send(new Request("http://floodgate.test//evil.example/forward-7/x"), { rules });
    const seen = await originLog("forward-7");
    expect(seen.map((r) => r.url)).toEqual(["/forward-7/b/%2F%2Fevil.example/c", "//evil.example/forward-7/x"]);
    expect(seen[0]?.headers.host).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it("answers from the built-in demo origin when ORIGIN_URL is demo", async () => {
    const res = await send(new Request("http://floodgate.test/demo/path?x=1", { headers: { "x-hello": "there" } }), {
      rules,
      ORIGIN_URL: "demo",
    });
    expect(await res.json()).toMatchObject({ method: "GET", path: "/demo/path", query: "?x=1", headers: { "x-hello": "there" } });
    expect(res.headers.get("RateLimit-Policy")).toBe('"proxy-ip";q=1000;w=60');
  });

  it("shows the demo origin's credential headers by name only, their values redacted", async () => {
    const secrets = { cookie: "session=s3cret", authorization: "Bearer t0ken", "proxy-authorization": "Basic cHJveHk=" };
    const res = await send(new Request("http://floodgate.test/demo/creds", { headers: { ...secrets, "x-hello": "there" } }), {
      rules,
      ORIGIN_URL: "demo",
    });
    const text = await res.text();
    const { headers } = JSON.parse(text) as { headers: Record<string, string> };
    expect(headers).toMatchObject({ cookie: "[redacted]", authorization: "[redacted]", "x-hello": "there" });
    // Proxy-Authorization is hop-by-hop: dropped before the echo, as before any origin.
    expect(headers).not.toHaveProperty("proxy-authorization");
    for (const value of Object.values(secrets)) expect(text).not.toContain(value);
  });

  it("proxies nothing when ORIGIN_URL is none: a 404 that says nothing of what exists, no rule counted, no origin reached", async () => {
    const none = [{ name: "proxy-none", key: "ip", limit: 1, period: "1h" }];
    const request = () => new Request("http://floodgate.test/origin-none/x", { headers: { "CF-Connecting-IP": "198.51.100.61" } });
    const first = await send(request(), { rules: none, ORIGIN_URL: "none" });
    const second = await send(request(), { rules: none, ORIGIN_URL: "none" });

    expect([first.status, second.status]).toEqual([404, 404]);
    expect(first.headers.get("Content-Type")).toBe("application/problem+json");
    expect(first.headers.has("RateLimit-Policy")).toBe(false);
    expect(await first.json()).toEqual({ type: "about:blank", title: "Not Found", status: 404, detail: "There is nothing here." });
    expect(await originLog("origin-none")).toEqual([]);
    // The rule's key was never counted: the same address through a real origin still has its one request.
    expect((await send(request(), { rules: none })).status).toBe(200);
  });

  it("answers a configuration error when ORIGIN_URL is absent or empty, never the demo", async () => {
    for (const origin of [undefined, ""]) {
      const res = await send(new Request("http://floodgate.test/demo/absent"), { rules, ORIGIN_URL: origin });
      expect(res.status).toBe(500);
      expect(res.headers.get("Content-Type")).toBe("application/problem+json");
      const problem = await res.json<{ title: string; detail: string }>();
      expect(problem.title).toBe("Invalid Configuration");
      expect(problem.detail).toMatch(/^ORIGIN_URL: not set; write ORIGIN_URL = "https:\/\/api\.example\.com"/);
    }
  });

  it("answers a configuration error naming LIMITER when the RateLimiter binding is missing, never the origin", async () => {
    const missing = [{ name: "no-limiter", key: "ip", limit: 5, period: "1m" }, { name: "no-limiter-fast", key: "ip", limit: 5, period: "1m", mode: "fast" }];
    const res = await send(new Request("http://floodgate.test/no-limiter/x", { headers: { "CF-Connecting-IP": "198.51.100.62" } }), { rules: missing, LIMITER: undefined as never });
    expect(res.status).toBe(500);
    const problem = await res.json<{ title: string; detail: string }>();
    expect(problem.title).toBe("Invalid Configuration");
    expect(problem.detail).toMatch(/^LIMITER: expected the RateLimiter Durable Object binding/);
    expect(await originLog("no-limiter")).toEqual([]);
  });

  it("never shows the credentials of an ORIGIN_URL that is no URL in the 500 every client is sent", async () => {
    for (const origin of ["https://deploy:s3cret-pw@api.example.com:99999", "https://s3cret-pw@api.example.com:99999/v1", "https://deploy:s3cret-pw@exa mple.com", "https://deploy:s3cret/pw@api.example.com", "https://deploy:s3cret?pw@api.example.com", "https://deploy:s3cret#pw@api.example.com"]) {
      const res = await send(new Request("http://floodgate.test/demo/credentials"), { rules, ORIGIN_URL: origin });
      expect(res.status).toBe(500);
      const problem = await res.json<{ detail: string }>();
      expect(problem.detail).toMatch(/^ORIGIN_URL: expected an absolute URL like "https:\/\/api\.example\.com", got "https:\/\/…@/);
      expect(problem.detail).not.toContain("s3cret");
    }
  });
});
