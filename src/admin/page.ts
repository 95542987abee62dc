/** The admin status page at GET /__floodgate/: a shell with no data, whose script reads the bearer-protected admin API. */

/**
 * The page's stylesheet. Inline, and allowed by its hash in the Content-Security-Policy, so any
 * change here changes the policy with it.
 */
const STYLE = `
:root { color-scheme: light; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a; background: #f4f6f8; }
body { max-width: 1000px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 16px; display: flex; align-items: center; gap: 12px; }
h1 span { font-weight: 400; color: #5d6b78; font-size: 15px; }
h2 { font-size: 17px; margin: 0 0 10px; }
.row h2 { margin: 0; }
section, form.card { background: #fff; border: 1px solid #d9dee3; border-radius: 8px; padding: 16px 18px; margin: 0 0 16px; }
[hidden] { display: none !important; }
label { font-weight: 600; margin-right: 6px; }
input, select, button { font: inherit; padding: 5px 9px; border: 1px solid #b8c1ca; border-radius: 5px; background: #fff; }
input { width: min(18em, 100%); box-sizing: border-box; }
button { cursor: pointer; background: #e9edf1; }
button.primary { background: #1f5fae; border-color: #1f5fae; color: #fff; }
button.danger { background: #b3261e; border-color: #b3261e; color: #fff; }
#signout { margin-left: auto; font-size: 14px; font-weight: 400; }
.problem { background: #fdecea; border: 1px solid #e6a19b; color: #7a1710; border-radius: 8px; padding: 12px 16px; margin: 0 0 16px; white-space: pre-wrap; overflow-wrap: anywhere; }
.note { color: #5d6b78; font-size: 13px; margin: 8px 0 0; }
.more { color: #5d6b78; font-size: 12.5px; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #e6e9ed; vertical-align: top; }
th { color: #46525e; font-weight: 600; background: #f7f9fa; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
#rules-body code { white-space: nowrap; }
#rules-body details code { white-space: pre-wrap; overflow-wrap: anywhere; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f0f2f5; padding: 1px 4px; border-radius: 3px; overflow-wrap: anywhere; white-space: pre-wrap; }
.row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
#chart { width: 100%; min-width: 560px; height: auto; display: block; margin-bottom: 12px; }
.scroll { overflow-x: auto; }
#chart text { font: 12px system-ui, sans-serif; fill: #1d232a; }
#chart .allowed { fill: #2e7d32; }
#chart .denied { fill: #c62828; }
#chart .dry_run_denied { fill: #ef8f00; }
#chart .count { fill: #46525e; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 12px 0; }
dt { color: #46525e; }
dd { margin: 0; font-variant-numeric: tabular-nums; }
.full { color: #2e7d32; font-weight: 600; }
.empty { color: #c62828; font-weight: 600; }
details summary { cursor: pointer; color: #46525e; margin-top: 8px; }
`;

/**
 * The page's script. It finds no data in the page; everything comes from the admin API with the
 * token the admin typed, kept in this tab's sessionStorage and sent only as a bearer header.
 * Every value reaches the page as text (textContent, createElement), never as markup.
 */
const SCRIPT = `
"use strict";
const API = "/__floodgate/";
const TOKEN = "floodgate-admin-token";
const OUTCOMES = ["allowed", "denied", "dry_run_denied"];
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let rules = [];
let shown = null;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}
function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const name in attributes) node.setAttribute(name, String(attributes[name]));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
function row(cells, header) {
  const tr = el("tr");
  for (const cell of cells) {
    const td = el(header ? "th" : "td");
    if (cell instanceof Node) td.append(cell); else td.textContent = String(cell);
    if (typeof cell === "number") td.className = "n";
    tr.append(td);
  }
  return tr;
}
function problemText(p) {
  return [p.status, p.title].filter(Boolean).join(" ") + (p.detail ? ": " + p.detail : "");
}
function showProblem(where, problem) {
  where.textContent = problemText(problem);
  where.hidden = false;
}

/** One admin API call; a non-2xx answer is thrown as its problem, and a 401 signs out. */
async function api(path, method) {
  let response;
  try {
    response = await fetch(API + path, {
      method: method || "GET",
      headers: { Authorization: "Bearer " + (sessionStorage.getItem(TOKEN) || "") },
      cache: "no-store", credentials: "omit", redirect: "error",
    });
  } catch (error) {
    throw { title: "Request failed", detail: String(error && error.message || error) };
  }
  if (response.ok) return response;
  let problem;
  try { problem = await response.json(); } catch { problem = { status: response.status, title: response.statusText }; }
  if (response.status === 401) signOut(problem);
  throw problem;
}

function signOut(problem) {
  sessionStorage.removeItem(TOKEN);
  rules = [];
  shown = null;
  for (const id of ["rules-body", "counters-body", "chart", "rule", "standing"]) $(id).replaceChildren();
  $("app").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("lookup-problem").hidden = true;
  if (problem) showProblem($("problem"), problem); else $("problem").hidden = true;
  $("token").value = "";
  $("token").focus();
}

async function load() {
  $("problem").hidden = true;
  let series;
  try {
    const [rulesResponse, metricsResponse] = await Promise.all([api("rules"), api("metrics")]);
    rules = (await rulesResponse.json()).rules;
    series = parseMetrics(await metricsResponse.text());
  } catch (problem) {
    if (sessionStorage.getItem(TOKEN)) showProblem($("problem"), problem);
    return;
  }
  $("signin").hidden = true;
  $("signout").hidden = false;
  $("app").hidden = false;
  renderRules();
  renderCounters(series);
}

/** A limit over its period, or in flight for a concurrency rule. */
function limitText(q) {
  return q.limit + (q.period ? " / " + q.period : " in flight");
}

function quotaText(q) {
  return q.unlimited ? "unlimited" : limitText(q) + (q.burst !== q.limit ? ", burst " + q.burst : "") + (q.delay !== undefined ? ", delay " + q.delay : "");
}

/** A field as the rules write it, "delay 2"; nothing when the rule has none. */
function field(name, value) {
  return value === undefined ? "" : name + " " + value;
}

/** A cell's value, and under it, on a quieter line, the fields the rule sets about it. */
function withMore(value, fields) {
  const more = fields.filter(Boolean);
  if (!more.length) return value;
  const cell = el("div", value);
  cell.append(el("div", more.join(", "), "more"));
  return cell;
}

/** A rule's limit, and under it the keys its overrides name, each with its own quota, folded. */
function limitCell(r) {
  if (!r.overrides) return limitText(r);
  const cell = el("div", limitText(r));
  const details = el("details", undefined, "overrides");
  const count = r.overrides.reduce((n, o) => n + o.keys.length, 0);
  details.append(el("summary", count + (count === 1 ? " key of its own" : " keys of their own")));
  for (const o of r.overrides) {
    for (const key of o.keys) {
      const line = el("div");
      line.append(el("code", key), ": " + quotaText(o));
      details.append(line);
    }
  }
  cell.append(details);
  return cell;
}

/** How the rule acts beyond its limit; the body its denials are answered with, folded. */
function policyCell(r) {
  const text = [r.dryRun ? "dry run" : "", field("block", r.block), r.count ? "counts " + r.count + " requests" : "", "onError " + r.onError, r.denyResponse ? "denyResponse " + r.denyResponse.status : ""].filter(Boolean).join(", ");
  if (!r.denyResponse || r.denyResponse.body === undefined) return text;
  const cell = el("div", text);
  const details = el("details", undefined, "body");
  details.append(el("summary", "its " + r.denyResponse.contentType + " body"), el("code", r.denyResponse.body));
  cell.append(details);
  return cell;
}

function renderRules() {
  const body = $("rules-body");
  body.replaceChildren(row(["rule", "match", "key", "algorithm", "limit", "burst", "cost", "mode", "policy"], true));
  const select = $("rule");
  const selected = select.value;
  select.replaceChildren();
  for (const r of rules) {
    const match = [r.match.methods ? r.match.methods.join(",") : "any method", r.match.path, r.match.host ? "host " + r.match.host : "", r.match.ips ? "ips " + r.match.ips.join(", ") : ""].filter(Boolean).join(" ");
    const key = withMore(r.key.join(" | "), [field("ipv6Prefix", r.ipv6Prefix), field("newKeysPerSecond", r.newKeysPerSecond)]);
    const algorithm = withMore(r.algorithm, [r.algorithm === "sliding-window" ? field("buckets", r.buckets) : "", field("delay", r.delay), field("warmup", r.warmup), field("slotTtl", r.slotTtl)]);
    const cost = withMore(String(r.cost), [field("responseCost", r.responseCost)]);
    const mode = withMore(r.mode, [field("sync", r.sync), field("aggregate", r.aggregate), field("timeout", r.timeout)]);
    body.append(row([el("code", r.name), match, key, algorithm, limitCell(r), r.burst, cost, mode, policyCell(r)]));
    const option = el("option", r.name);
    option.value = r.name;
    select.append(option);
  }
  if (rules.some((r) => r.name === selected)) select.value = selected;
}

/** The Prometheus text format, read back: one {name, labels, value} per sample line. */
function parseMetrics(text) {
  const series = [];
  for (const line of text.split("\\n")) {
    const m = /^([A-Za-z_:][\\w:]*)(?:\\{(.*)\\})? (\\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    const pairs = /(\\w+)="((?:[^"\\\\]|\\\\.)*)"/g;
    for (let p; (p = pairs.exec(m[2] || "")); ) labels[p[1]] = p[2].replace(/\\\\(.)/g, (_, c) => (c === "n" ? "\\n" : c));
    series.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return series;
}

function renderCounters(series) {
  const body = $("counters-body");
  body.replaceChildren(row(["counter", "labels", "value"], true));
  for (const s of series) {
    const labels = Object.keys(s.labels).sort().map((k) => k + "=" + s.labels[k]).join(", ");
    body.append(row([el("code", s.name), labels, s.value]));
  }
  if (!series.length) body.append(row(["nothing counted yet in this isolate", "", ""]));
  const decisions = {};
  for (const r of rules) decisions[r.name] = { allowed: 0, denied: 0, dry_run_denied: 0 };
  for (const s of series) {
    if (s.name !== "floodgate_decisions_total" || !s.labels.rule) continue;
    const counts = decisions[s.labels.rule] || (decisions[s.labels.rule] = { allowed: 0, denied: 0, dry_run_denied: 0 });
    if (OUTCOMES.includes(s.labels.decision)) counts[s.labels.decision] += s.value;
  }
  renderChart(decisions);
}

/** Decisions per rule as grouped horizontal bars: allowed, denied, dry_run_denied. */
function renderChart(decisions) {
  const chart = $("chart");
  const names = Object.keys(decisions);
  const bar = 13, group = OUTCOMES.length * bar + 14, left = 170, width = 900, top = 28;
  const max = Math.max(1, ...names.flatMap((n) => OUTCOMES.map((o) => decisions[n][o])));
  const height = top + Math.max(1, names.length) * group;
  chart.replaceChildren();
  chart.setAttribute("viewBox", "0 0 " + width + " " + height);
  chart.append(svg("title", {}, "Decisions per rule in this isolate"));
  OUTCOMES.forEach((o, i) => {
    chart.append(svg("rect", { x: left + i * 150, y: 6, width: 12, height: 12, class: o }));
    chart.append(svg("text", { x: left + i * 150 + 18, y: 16 }, o.replace(/_/g, " ")));
  });
  if (!names.length) chart.append(svg("text", { x: left, y: top + 14 }, "no rules"));
  names.forEach((name, i) => {
    const y = top + i * group;
    const label = svg("text", { x: left - 10, y: y + group / 2, "text-anchor": "end", "dominant-baseline": "middle" }, name.length > 24 ? name.slice(0, 23) + "…" : name);
    label.append(svg("title", {}, name));
    chart.append(label);
    OUTCOMES.forEach((o, j) => {
      const value = decisions[name][o];
      const w = Math.round((value / max) * (width - left - 60));
      const rect = svg("rect", { x: left, y: y + j * bar, width: Math.max(w, value ? 2 : 0), height: bar - 2, class: o, "data-rule": name, "data-outcome": o, "data-value": value });
      rect.append(svg("title", {}, name + ": " + o + " " + value));
      chart.append(rect, svg("text", { x: left + w + 6, y: y + j * bar + bar - 3, class: "count" }, value));
    });
  });
}

function statePath() {
  return "state?rule=" + encodeURIComponent(shown.rule) + "&key=" + encodeURIComponent(shown.key);
}

async function lookUp(note) {
  $("lookup-problem").hidden = true;
  let body;
  try {
    body = await (await api(statePath())).json();
  } catch (problem) {
    $("standing").replaceChildren();
    if (sessionStorage.getItem(TOKEN)) showProblem($("lookup-problem"), problem);
    return;
  }
  renderStanding(body, note);
}

function inTime(ms) {
  const wait = ms - Date.now();
  return wait <= 0 ? "now" : "in " + (wait / 1000).toFixed(1) + " s (" + new Date(ms).toLocaleTimeString() + ")";
}

function renderStanding(body, note) {
  const found = rules.find((r) => r.name === body.rule);
  // A key with an override has its own quota: what it holds and over what period are the override's.
  const rule = found && body.override ? { ...found, ...body.override } : found;
  const s = body.state;
  // What a key holds when full: its burst (equal to the limit where burst does not apply), and one more for gcra, whose burst is a tolerance.
  const capacity = rule ? rule.burst + (rule.algorithm === "gcra" ? 1 : 0) : s.limit;
  const key = el("code", body.key);
  key.id = "shown-key";
  const heading = el("p");
  heading.append("Rule ", el("code", body.rule), ", key ", key);
  const remaining = el("span", s.remaining + " of " + capacity);
  remaining.id = "remaining";
  const level = s.remaining >= capacity ? el("span", "full quota", "full") : s.remaining <= 0 ? el("span", "none left", "empty") : null;
  const dl = el("dl");
  const item = (term, ...values) => {
    const dd = el("dd");
    dd.append(...values);
    dl.append(el("dt", term), dd);
  };
  item("allowed now", s.allowed ? "yes" : "no");
  item("remaining", remaining, ...(level ? [" — ", level] : []));
  item("limit", body.override && body.override.unlimited ? "none (this key's override leaves it unlimited)" : s.limit + (rule && !rule.period ? " in flight" : " per " + (rule ? rule.period : "period")) + (body.override ? " (this key's override)" : ""));
  item("more quota", inTime(s.moreAt));
  item("back to full quota", inTime(s.resetAt));
  item("retry after", s.retryAfter ? (s.retryAfter / 1000).toFixed(1) + " s" : "—");
  if (s.reason) item("reason", s.reason);
  if (body.isolate) item("this isolate", "leased " + body.isolate.leased + ", returning " + body.isolate.returning);
  if (body.isolate === null) item("this isolate", "holds nothing for this key");
  const reset = el("button", "Reset this key", "danger");
  reset.id = "reset";
  reset.type = "button";
  reset.addEventListener("click", resetKey);
  const parts = [heading, dl, reset];
  if (note) parts.push(el("p", note, "note"));
  $("standing").replaceChildren(...parts);
}

async function resetKey() {
  try {
    await api(statePath(), "DELETE");
  } catch (problem) {
    if (sessionStorage.getItem(TOKEN)) showProblem($("lookup-problem"), problem);
    return;
  }
  await lookUp("Reset at " + new Date().toLocaleTimeString() + ". Other isolates keep fast-mode leases until they expire.");
}

$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN, token);
  $("token").value = "";
  load();
});
$("signout").addEventListener("click", () => signOut());
$("refresh").addEventListener("click", () => load());
$("lookup").addEventListener("submit", (event) => {
  event.preventDefault();
  shown = { rule: $("rule").value, key: $("key").value };
  lookUp();
});
if (sessionStorage.getItem(TOKEN)) load(); else $("token").focus();
`;

/** The whole page: markup, the style and the script above; not one value from the configuration or the counters. */
const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>floodgate status</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
<h1>floodgate <span>status of this isolate</span><button id="signout" type="button" hidden>Sign out</button></h1>
<div id="problem" class="problem" role="alert" hidden></div>
<form id="signin" class="card" autocomplete="off">
  <div class="row">
    <label for="token">Admin token</label>
    <input id="token" type="password" autocomplete="off" spellcheck="false" required>
    <button class="primary" type="submit">Sign in</button>
  </div>
  <p class="note">The token stays in this tab (sessionStorage) and is sent only as a bearer header to the admin API.</p>
</form>
<main id="app" hidden>
  <section>
    <h2>Rules</h2>
    <div class="scroll"><table id="rules-body"></table></div>
  </section>
  <section>
    <div class="row"><h2>Counters</h2><button id="refresh" type="button">Refresh</button></div>
    <div class="scroll"><svg id="chart" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Decisions per rule"></svg></div>
    <details><summary>All counters</summary><table id="counters-body"></table></details>
    <p class="note">Counted by the isolate that answered; other isolates keep their own.</p>
  </section>
  <section>
    <h2>Key lookup</h2>
    <form id="lookup" class="row" autocomplete="off">
      <label for="rule">Rule</label><select id="rule"></select>
      <label for="key">Key</label><input id="key" spellcheck="false" placeholder="203.0.113.7|k-123" required>
      <button class="primary" type="submit">Look up</button>
    </form>
    <p class="note">The key as floodgate builds it: the parts joined with |, and inside a value %, | and # written %25, %7C and %23.</p>
    <div id="lookup-problem" class="problem" role="alert" hidden></div>
    <div id="standing"></div>
  </section>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;

let policy: Promise<string> | undefined;

/** `sha256-<base64>`, the CSP source that allows an inline element with exactly this text. */
async function hashSource(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return `'sha256-${btoa(String.fromCharCode(...digest))}'`;
}

/**
 * The page's Content-Security-Policy: nothing is allowed but the inline style and script by
 * their hashes, calls back to this origin, and the empty data: icon; no markup can be assigned
 * from a string (Trusted Types), no base, no form submission, no framing. Hashed once per isolate.
 */
function statusPagePolicy(): Promise<string> {
  policy ??= Promise.all([hashSource(SCRIPT), hashSource(STYLE)]).then(([script, style]) =>
    [
      "default-src 'none'",
      `script-src ${script}`,
      `style-src ${style}`,
      "connect-src 'self'",
      "img-src data:",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
      "require-trusted-types-for 'script'",
      "trusted-types 'none'",
    ].join("; "),
  );
  return policy;
}

/**
 * The status page's response: the same bytes for everyone, never cached.
 *
 * @example
 * if (request.method === "GET" && url.pathname === ADMIN_PREFIX) return statusPage();
 */
export async function statusPage(): Promise<Response> {
  return new Response(STATUS_PAGE, {
    headers: {
      "Content-Type": "text/html; charset=utf-8",
      "Content-Security-Policy": await statusPagePolicy(),
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
      "Cache-Control": "no-store",
      "Cross-Origin-Opener-Policy": "same-origin",
      "Cross-Origin-Resource-Policy": "same-origin",
    },
  });
}
