// The status page in a real browser: Debian's Chromium, driven by puppeteer-core, against floodgate under `wrangler dev`.
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "./root";
import { startWranglerDev, type WranglerDev } from "./wrangler-dev";

/** Debian's package installs it here; CHROMIUM_PATH overrides. Nothing downloads a browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const OUTPUT = join(ROOT, "test/output");
const TOKEN = "browser-admin-token-7f3a9c";
const rules = [
  { name: "per-key", match: { path: "/api/*" }, key: ["header:x-api-key", "header:x-team"], limit: 3, period: "1h", overrides: [{ keys: ["k-partner|#none"], limit: 10, period: "1m" }, { keys: [`${"k".repeat(98)}|#none`], unlimited: true }] },
  { name: "login-dry", match: { path: "/login", methods: ["POST"] }, key: "ip", limit: 1, period: "1h", dryRun: true },
  { name: "per-ip", key: "ip", limit: 1000, period: "1h" },
  // Rules no request reaches, between them setting every field a rule has.
  { name: "every-field", match: { path: "/every/*", methods: ["GET", "POST"], host: "api.example.com", ips: ["192.0.2.0/24"] }, key: ["ip", "header:x-api-key"], algorithm: "gcra", limit: 10, period: "1m", burst: 4, delay: 2, cost: "header:x-cost", responseCost: "header:x-cost-used", ipv6Prefix: 48, newKeysPerSecond: 50, timeout: "2s", onError: "allow", block: "5m", denyResponse: { status: 503, body: "busy, try later", contentType: "text/plain" }, overrides: [{ keys: ["192.0.2.5|k-1"], limit: 20, period: "1m", burst: 6, delay: 3 }] },
  { name: "warm", match: { path: "/warm/*" }, key: "header:x-api-key", algorithm: "token-bucket", limit: 5, period: "1s", burst: 10, warmup: "30s" },
  { name: "fast-window", match: { path: "/fast/*" }, key: "global", mode: "fast", limit: 1000, period: "1m", buckets: 10, sync: "2s", aggregate: "continent", count: "successful" },
  { name: "slots", match: { path: "/slots/*" }, algorithm: "concurrency", limit: 5, slotTtl: "2m" },
];
/** An API key that needs escaping everywhere: in the key (|, %, #), in a URL (all of them), and in HTML. */
const API_KEY = `k|1%2#3<script>window.pwned=1</script><b id="injected">x</b>`;
/** Its key under `per-key`, as floodgate builds it: `%`, `|`, `#` escaped in the value; x-team missing. */
const KEY = `k%7C1%252%233<script>window.pwned=1</script><b id="injected">x</b>|#none`;

/** The browser globals the page callbacks read; this file is type-checked without the DOM library. */
interface PageWindow {
  document: { body: { innerText: string }; querySelectorAll(selectors: string): { length: number }; getElementById(id: string): unknown };
  sessionStorage: { length: number; getItem(key: string): string | null };
  pwned?: unknown;
}
type Hideable = { hidden: boolean };

describe("the status page in Chromium", () => {
  let dev: WranglerDev | undefined;
  let dir: string | undefined;
  let browser: Browser | undefined;
  let page: Page;
  /** Every URL the page requested, and whether each admin API call carried the bearer header. */
  const requests: { url: string; authorization: string | undefined }[] = [];
  /** Console lines about the Content-Security-Policy or Trusted Types, and uncaught errors. */
  const violations: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
    dir = await mkdtemp(join(tmpdir(), "floodgate-browser-"));
    dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: "demo", ADMIN_TOKEN: TOKEN, RATE_LIMIT_RULES: JSON.stringify(rules) } });
    // Counters that move: per-key allows 3 and denies the 4th; login-dry allows 1 and would deny 2.
    for (let i = 0; i < 4; i++) await (await dev.fetch("/api/things", { headers: { "x-api-key": API_KEY } })).arrayBuffer();
    for (let i = 0; i < 3; i++) await (await dev.fetch("/login", { method: "POST" })).arrayBuffer();
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // root in a container: no sandbox; a small /dev/shm: use /tmp.
      args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 900 });
    page.on("request", (request) => requests.push({ url: request.url(), authorization: request.headers()["authorization"] }));
    page.on("console", (message) => {
      if (/Content Security Policy|Trusted Type/i.test(message.text())) violations.push(message.text());
    });
    page.on("pageerror", (error) => violations.push(String(error)));
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await dev?.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const visibleText = () => page.evaluate(() => (globalThis as unknown as PageWindow).document.body.innerText);
  const shown = (selector: string) => page.waitForSelector(selector, { visible: true, timeout: 10_000 });

  it("loads with its CSP and no data", async () => {
    const response = await page.goto(new URL("/__floodgate/", dev!.url).href, { waitUntil: "load" });
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(await page.$eval("#app", (app) => (app as unknown as Hideable).hidden)).toBe(true);
    const text = await visibleText();
    for (const secret of ["per-key", "login-dry", "k%7C1", "window.pwned"]) expect(text).not.toContain(secret);
  });

  it("shows a wrong token the API's own 401 and nothing else", async () => {
    const api401 = (await (await dev!.fetch("/__floodgate/rules", { headers: { Authorization: "Bearer wrong-token" } })).json()) as { status: number; title: string; detail: string };
    await page.type("#token", "wrong-token");
    await page.click("#signin button[type=submit]");
    const problem = await shown("#problem");
    expect(await problem!.evaluate((node) => node.textContent)).toBe(`${api401.status} ${api401.title}: ${api401.detail}`);
    expect(await page.$eval("#app", (app) => (app as unknown as Hideable).hidden)).toBe(true);
    expect(await page.evaluate(() => (globalThis as unknown as PageWindow).sessionStorage.length)).toBe(0);
    const text = await visibleText();
    for (const secret of ["per-key", "login-dry", "allowed", "k%7C1"]) expect(text).not.toContain(secret);
    await mkdir(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, "status-page-401.png") });
  });

  it("signs in with the right token and shows the rules and the chart", async () => {
    await page.type("#token", TOKEN);
    await page.click("#signin button[type=submit]");
    await shown("#app");
    expect(await page.$eval("#problem", (node) => (node as unknown as Hideable).hidden)).toBe(true);
    expect(await page.evaluate(() => (globalThis as unknown as PageWindow).sessionStorage.getItem("floodgate-admin-token"))).toBe(TOKEN);
    const ruleNames = await page.$$eval("#rules-body tr td:first-child", (cells) => cells.map((cell) => cell.textContent));
    expect(ruleNames).toEqual(["per-key", "login-dry", "per-ip", "every-field", "warm", "fast-window", "slots"]);
    const bars = await page.$$eval("#chart rect[data-rule]", (rects) =>
      Object.fromEntries(rects.map((rect) => [`${rect.getAttribute("data-rule")} ${rect.getAttribute("data-outcome")}`, Number(rect.getAttribute("data-value"))])),
    );
    expect(bars).toMatchObject({ "per-key allowed": 3, "per-key denied": 1, "per-key dry_run_denied": 0, "login-dry allowed": 1, "login-dry dry_run_denied": 2, "per-ip allowed": 7 });
    // The bars are drawn: wider for more.
    const width = (rule: string, outcome: string) => page.$eval(`#chart rect[data-rule="${rule}"][data-outcome="${outcome}"]`, (rect) => Number(rect.getAttribute("width")));
    expect(await width("per-ip", "allowed")).toBeGreaterThan(await width("per-key", "allowed"));
    expect(await width("per-key", "allowed")).toBeGreaterThan(await width("per-key", "denied"));
  });

  it("shows every field of each rule as parsed, the defaults it was left with too", async () => {
    const cells = (rule: string) =>
      page.$$eval("#rules-body tr", (rows, rule) => {
        const row = rows.find((r) => r.querySelector("td")?.textContent === rule)!;
        return [...row.querySelectorAll("td")].map((cell) => (cell as unknown as { innerText: string }).innerText);
      }, rule);
    expect(await cells("every-field")).toEqual([
      "every-field", "GET,POST /every/* host api.example.com ips 192.0.2.0/24", "ip | header:x-api-key\nipv6Prefix 48, newKeysPerSecond 50", "gcra\ndelay 2",
      "10 / 1m\n1 key of its own", "4", "header:x-cost\nresponseCost header:x-cost-used", "strict\ntimeout 2s", "block 5m, onError allow, denyResponse 503\nits text/plain body",
    ]);
    expect(await cells("warm")).toEqual(["warm", "any method /warm/*", "header:x-api-key", "token-bucket\nwarmup 30s", "5 / 1s", "10", "1", "strict\ntimeout 1s", "onError local"]);
    expect(await cells("fast-window")).toEqual(["fast-window", "any method /fast/*", "global", "sliding-window\nbuckets 10", "1000 / 1m", "1000", "1", "fast\nsync 2s, aggregate continent, timeout 1s", "counts successful requests, onError local"]);
    expect(await cells("slots")).toEqual(["slots", "any method /slots/*", "ip\nipv6Prefix 56", "concurrency\nslotTtl 2m", "5 in flight", "5", "1", "strict\ntimeout 1s", "onError local"]);
    // What is folded: an override's own quota, delay included, and the body a denial is answered with.
    expect(await page.$eval("#rules-body tr:nth-child(5) details.overrides div", (node) => node.textContent)).toBe("192.0.2.5|k-1: 20 / 1m, burst 6, delay 3");
    expect(await page.$eval("#rules-body tr:nth-child(5) details.body code", (node) => node.textContent)).toBe("busy, try later");
  });

  it("looks the tricky key up and shows it literally, injecting nothing", async () => {
    const scripts = await page.evaluate(() => (globalThis as unknown as PageWindow).document.querySelectorAll("script").length);
    await page.select("#rule", "per-key");
    await page.type("#key", KEY);
    await page.click("#lookup button[type=submit]");
    await shown("#shown-key");
    expect(await page.$eval("#shown-key", (node) => node.textContent)).toBe(KEY);
    expect(await page.evaluate(() => (globalThis as unknown as PageWindow).document.querySelectorAll("script").length)).toBe(scripts);
    expect(await page.evaluate(() => {
      const window = globalThis as unknown as PageWindow;
      return [window.document.getElementById("injected"), window.pwned ?? null];
    })).toEqual([null, null]);
    expect(await visibleText()).toContain(KEY);
    expect(await page.$eval("#remaining", (node) => node.textContent)).toBe("0 of 3");
  });

  it("resets it, and the standing shows a full quota", async () => {
    await page.click("#reset");
    expect(await (await shown("#standing .full"))!.evaluate((node) => node.textContent)).toBe("full quota");
    expect(await page.$eval("#remaining", (node) => node.textContent)).toBe("3 of 3");
    expect(await page.$eval("#shown-key", (node) => node.textContent)).toBe(KEY);
    // The object itself was reset, not just the page.
    const state = (await (await dev!.fetch(`/__floodgate/state?rule=per-key&key=${encodeURIComponent(KEY)}`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json()) as { state: { remaining: number } };
    expect(state.state.remaining).toBe(3);
    await page.screenshot({ path: join(OUTPUT, "status-page.png"), fullPage: true });
  });

  it("tells a rule's overridden keys, and a key's own quota when it has one", async () => {
    expect(await page.$eval("#rules-body tr:nth-child(2) details.overrides summary", (node) => node.textContent)).toBe("2 keys of their own");
    expect(await page.$eval("#rules-body tr:nth-child(2) details.overrides div", (node) => node.textContent)).toBe("k-partner|#none: 10 / 1m");
    // Opened, a long key wraps inside its cell rather than pushing the table past the page.
    await page.$eval("#rules-body tr:nth-child(2) details.overrides", (node) => void ((node as unknown as { open: boolean }).open = true));
    const table = await page.$eval("#rules-body", (node) => (node as unknown as { closest(s: string): { getBoundingClientRect(): { width: number } } }).closest("table").getBoundingClientRect().width);
    expect(table).toBeLessThanOrEqual(1100);
    await page.$eval("#rules-body tr:nth-child(2) details.overrides", (node) => void ((node as unknown as { open: boolean }).open = false));
    await page.$eval("#key", (input) => void ((input as unknown as { value: string }).value = ""));
    await page.type("#key", "k-partner|#none");
    await page.click("#lookup button[type=submit]");
    await page.waitForFunction(() => (globalThis as unknown as PageWindow).document.body.innerText.includes("this key's override"), { timeout: 10_000 });
    expect(await page.$eval("#remaining", (node) => node.textContent)).toBe("10 of 10");
    expect(await visibleText()).toContain("10 per 1m (this key's override)");
  });

  it("fits a 320 px screen: nothing wider than it but the chart and the tables, which scroll in their own boxes", async () => {
    await page.setViewport({ width: 320, height: 640 });
    const overflow = await page.evaluate(() => {
      const document = (globalThis as unknown as PageWindow).document as unknown as { documentElement: { scrollWidth: number; clientWidth: number } };
      return document.documentElement.scrollWidth - document.documentElement.clientWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(OUTPUT, "status-page-320.png"), fullPage: true });
    await page.setViewport({ width: 1100, height: 900 });
  });

  it("kept the token out of every URL, sent it on every API call, and broke no policy", async () => {
    expect(requests.length).toBeGreaterThan(4);
    for (const { url } of requests) expect(url).not.toContain(TOKEN);
    const apiCalls = requests.filter(({ url }) => new URL(url).pathname !== "/__floodgate/");
    expect(apiCalls.map(({ url }) => new URL(url).pathname)).toEqual(expect.arrayContaining(["/__floodgate/rules", "/__floodgate/metrics", "/__floodgate/state"]));
    for (const { url, authorization } of apiCalls) expect(authorization, url).toMatch(/^Bearer /);
    expect(page.url()).toBe(new URL("/__floodgate/", dev!.url).href);
    expect(violations).toEqual([]);
  });
});
