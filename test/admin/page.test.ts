import { describe, expect, it } from "vitest";
import { send } from "../helpers/worker";

const TOKEN = "s3cret-page-token";
const rules = [
  { name: "page-window", limit: 3, period: "1m" },
  { name: "page-by-key", key: "header:x-api-key", limit: 5, period: "10s", algorithm: "token-bucket" },
];
const get = (path: string, headers: Record<string, string> = {}, adminToken: string | null = TOKEN) =>
  send(new Request(`http://floodgate.test${path}`, { headers }), { rules, ...(adminToken === null ? {} : { ADMIN_TOKEN: adminToken }) });

/** The text between `<tag>` and `</tag>`: the only one there is. */
function inline(html: string, tag: "script" | "style"): string {
  const all = [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))];
  expect(all).toHaveLength(1);
  return all[0]![1]!;
}

async function sha256(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return `'sha256-${btoa(String.fromCharCode(...digest))}'`;
}

/** The policy as directive name → its sources. */
function directives(policy: string): Map<string, string[]> {
  return new Map(policy.split(";").map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name!, sources]));
}

describe("the status page at GET /__floodgate/", () => {
  it("is served without a token, as HTML with no data in it", async () => {
    // Counters that would show if the page held any data.
    await send(new Request("http://floodgate.test/page/x", { headers: { "CF-Connecting-IP": "192.0.2.90", "x-api-key": "page-secret-key" } }), { rules, ADMIN_TOKEN: TOKEN });
    const res = await get("/__floodgate/");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toBe("text/html; charset=utf-8");
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/);
    for (const data of ["page-window", "page-by-key", "192.0.2.90", "page-secret-key", 'decision="', TOKEN]) expect(html).not.toContain(data);
    // The same bytes for everyone, token or not.
    expect(await (await get("/__floodgate/", { Authorization: `Bearer ${TOKEN}` })).text()).toBe(html);
  });

  it("allows its inline script and style by their exact hashes, and nothing else", async () => {
    const res = await get("/__floodgate/");
    const html = await res.text();
    const policy = directives(res.headers.get("Content-Security-Policy") ?? "");
    expect(policy.get("script-src")).toEqual([await sha256(inline(html, "script"))]);
    expect(policy.get("style-src")).toEqual([await sha256(inline(html, "style"))]);
    expect(policy.get("default-src")).toEqual(["'none'"]);
    expect(policy.get("connect-src")).toEqual(["'self'"]);
    for (const name of ["base-uri", "form-action", "frame-ancestors"]) expect(policy.get(name)).toEqual(["'none'"]);
    expect(policy.get("require-trusted-types-for")).toEqual(["'script'"]);
    expect(res.headers.get("X-Content-Type-Options")).toBe("nosniff");
    expect(res.headers.get("Referrer-Policy")).toBe("no-referrer");
    expect(res.headers.get("Cache-Control")).toBe("no-store");
  });

  it("loads nothing from elsewhere and sends its form nowhere", async () => {
    const html = await (await get("/__floodgate/")).text();
    expect(html).not.toMatch(/\bsrc=|<link(?![^>]*href="data:,")|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(html).not.toMatch(/\baction=|<(input|select|textarea)[^>]*\bname=/);
    expect(inline(html, "script")).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|localStorage/);
  });

  it("answers 404 like the rest of the admin API without ADMIN_TOKEN", async () => {
    const [page, rulesCall] = await Promise.all([get("/__floodgate/", {}, null), get("/__floodgate/rules", { Authorization: "Bearer x" }, null)]);
    expect(page.status).toBe(404);
    expect(await page.text()).toBe(await rulesCall.text());
  });

  it("answers HEAD as GET without a token", async () => {
    const res = await send(new Request("http://floodgate.test/__floodgate/", { method: "HEAD" }), { rules, ADMIN_TOKEN: TOKEN });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
  });

  it("is only the exact path and GET: the API behind it still needs the token", async () => {
    const unauthorized = await (await get("/__floodgate/rules", { Authorization: "Bearer wrong" })).text();
    for (const [path, method] of [["/__floodgate/rules", "GET"], ["/__floodgate/metrics", "GET"], ["/__floodgate/state?rule=page-window&key=192.0.2.90", "GET"], ["/__floodgate/", "POST"], ["/__floodgate/index.html", "GET"], ["/__floodgate//", "GET"]] as const) {
      const res = await send(new Request(`http://floodgate.test${path}`, { method, headers: { Authorization: "Bearer wrong" } }), { rules, ADMIN_TOKEN: TOKEN });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await res.text()).toBe(unauthorized);
    }
  });
});
