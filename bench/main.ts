/**
 * The bench orchestrator (started by bench/run.mjs): runs each part in order, renders their charts,
 * and writes bench/RESULTS.md and bench/results.json. A part that fails is reported as failed, with
 * its error, and the run goes on.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { arch, cpus, platform, release, totalmem } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { bundleForNode } from "./lib/build";
import { CHARTS, ROOT } from "./lib/paths";
import { keptParts, type KeptPart } from "./lib/kept";
import type { ChartSpec, RunOptions, Section } from "./lib/section";
import { table } from "./lib/stats";
import { renderChart } from "./lib/svg";

/** What every part gets: the contract's options, plus the sections that ran before it (the cost part reads end-to-end's counters). */
export interface OrchestratedOptions extends RunOptions {
  earlier: Record<string, Section>;
}

interface PartEntry {
  id: string;
  title: string;
  /** the part's source, relative to the repository root; it exports `run` */
  file: string;
  /** shown instead of a failure while the part's file does not exist */
  placeholder?: string;
}

/** The parts, in the order they run and appear in RESULTS.md. */
export const PARTS: PartEntry[] = [
  { id: "decision-cost", title: "Decision cost", file: "bench/decision-cost.ts" },
  { id: "accuracy", title: "Accuracy", file: "bench/accuracy.ts" },
  { id: "end-to-end", title: "End to end through workerd", file: "bench/end-to-end.ts" },
  { id: "strict-ceiling", title: "Strict ceiling in workerd", file: "bench/strict-ceiling.ts" },
  {
    id: "fast-path",
    title: "Fast path",
    file: "bench/fast-path.ts",
    placeholder:
      "Not yet measured: the fast path's own benchmark (`bench/fast-path.ts`) does not exist yet. " +
      "It will plug in here by exporting `run(options): Promise<Section>` like every other part; nothing else needs to change.",
  },
  { id: "attack", title: "Attack", file: "bench/attack.ts" },
  { id: "cost", title: "Cost", file: "bench/cost.ts" },
];

type Status = "ok" | "failed" | "placeholder" | "skipped" | "kept";

export interface Outcome {
  id: string;
  title: string;
  status: Status;
  seconds: number;
  section?: Section;
  error?: string;
  /** charts that could not be rendered */
  chartErrors: string[];
}

const USAGE = `usage: npm run bench [-- [--quick] [--only <part>,<part>…]]
  --quick   smaller sizes, a few minutes; writes bench/RESULTS.md as a quick run
  --only    runs just these parts and keeps the others as the last full run left them: ${PARTS.map((p) => p.id).join(", ")}
  --help    this text`;

/** The run's flags, or the text to print instead: the usage for --help, an error naming a bad flag. */
function readFlags(argv: string[]): { quick: boolean; only: Set<string> | undefined } | string {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { quick: { type: "boolean" }, only: { type: "string" }, help: { type: "boolean" } }, strict: true, allowPositionals: false }));
  } catch (error) {
    return `npm run bench: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`;
  }
  if (values.help) return USAGE;
  const only = values.only === undefined ? undefined : new Set(values.only.split(",").map((id) => id.trim()).filter(Boolean));
  const unknown = [...(only ?? [])].filter((id) => !PARTS.some((p) => p.id === id));
  if (only && (only.size === 0 || unknown.length > 0)) return `npm run bench: --only: ${only.size === 0 ? "names no part" : `no part named ${unknown.map((id) => JSON.stringify(id)).join(", ")}`}; the parts are ${PARTS.map((p) => p.id).join(", ")}`;
  return { quick: values.quick ?? false, only };
}

/** Parses the flags, runs the parts, writes the report; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const flags = readFlags(argv);
  if (typeof flags === "string") {
    (flags === USAGE ? console.log : console.error)(flags);
    return flags === USAGE ? 0 : 2;
  }
  const { quick, only } = flags;
  const command = `npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}`;
  const started = Date.now();
  const timeLimitS = quick ? 240 : 900;
  // Before anything runs: the tree the numbers come from, whatever is edited during the run.
  const machine = machineInfo();

  await mkdir(CHARTS, { recursive: true });

  // A partial full-size run keeps the parts it does not run as the last run left them; a quick one, whose sizes differ, does not.
  const kept = only && !quick ? await lastRun() : new Map<string, KeptPart>();
  const earlier: Record<string, Section> = {};
  const outcomes: Outcome[] = [];
  for (const part of PARTS) {
    if (only && !only.has(part.id)) {
      const last = kept.get(part.id);
      // A later part reads it as if it had run (cost reads end-to-end's counters).
      if (last) earlier[part.id] = last.section;
      outcomes.push(last ? { id: part.id, title: last.section.title, status: "kept", seconds: last.seconds, section: last.section, chartErrors: [] } : { id: part.id, title: part.title, status: "skipped", seconds: 0, chartErrors: [] });
      continue;
    }
    const outcome = await runPart(part, { quick, earlier, timeLimitS });
    if (outcome.section) earlier[part.id] = outcome.section;
    if (outcome.section && kept.size > 0) {
      const note = `*Re-run alone at commit ${machine.commit} (\`${command}\`) and spliced in: every other part is as the run before left it.*`;
      outcome.section = { ...outcome.section, markdown: `${note}\n\n${outcome.section.markdown}` };
    }
    outcomes.push(outcome);
  }

  // A whole run replaces every chart, once its own are drawn: one stopped halfway leaves the committed charts as they were.
  // A partial one (--only) leaves the other parts' charts alone.
  if (!only) for (const file of staleCharts(await readdir(CHARTS), outcomes)) await rm(join(CHARTS, file));

  const totalS = (Date.now() - started) / 1000;
  await writeFile(join(ROOT, "bench/RESULTS.md"), renderResults(outcomes, { command, quick, totalS, machine }));
  if (!quick) await updateStanding(outcomes);
  await writeFile(
    join(ROOT, "bench/results.json"),
    `${JSON.stringify(
      {
        generatedAt: new Date(started).toISOString(),
        command,
        quick,
        seconds: round1(totalS),
        machine,
        parts: outcomes.map((o) => ({
          id: o.id,
          title: o.section?.title ?? o.title,
          status: o.status,
          seconds: round1(o.seconds),
          ...(o.error ? { error: o.error } : {}),
          charts: o.section?.charts ?? [],
          verdicts: o.section?.verdicts ?? [],
          headline: o.section?.headline ?? null,
          data: o.section?.data ?? null,
        })),
      },
      null,
      2,
    )}\n`,
  );
  const failed = outcomes.filter((o) => o.status === "failed");
  console.error(`bench: done in ${round1(totalS)} s; ${failed.length ? `${failed.length} part(s) failed: ${failed.map((o) => o.id).join(", ")}; ` : ""}see bench/RESULTS.md`);
  return failed.length ? 1 : 0;
}

/** The charts among `files` (bench/charts) that no part of a whole run drew: an earlier run's, of a part that failed or whose chart did not render. */
export function staleCharts(files: readonly string[], outcomes: readonly Pick<Outcome, "status" | "section" | "chartErrors">[]): string[] {
  const drawn = new Set(
    outcomes.flatMap((o) => (o.status === "ok" ? (o.section?.charts ?? []).filter((c) => !o.chartErrors.some((e) => e.startsWith(`${c.file}:`))).map((c) => `${c.file}.svg`) : [])),
  );
  return files.filter((file) => file.endsWith(".svg") && !drawn.has(file));
}

async function runPart(part: PartEntry, context: { quick: boolean; earlier: Record<string, Section>; timeLimitS: number }): Promise<Outcome> {
  const started = Date.now();
  const elapsed = () => (Date.now() - started) / 1000;
  const log = (line: string) => console.error(`[${part.id} ${elapsed().toFixed(0).padStart(3)} s] ${line}`);
  if (!existsSync(join(ROOT, part.file))) {
    if (part.placeholder) {
      log("not yet measured (placeholder)");
      return { id: part.id, title: part.title, status: "placeholder", seconds: 0, section: { id: part.id, title: part.title, markdown: part.placeholder, charts: [], data: null }, chartErrors: [] };
    }
    log(`${part.file} does not exist`);
    return { id: part.id, title: part.title, status: "failed", seconds: 0, error: `${part.file} does not exist`, chartErrors: [] };
  }
  log("starting");
  try {
    const bundle = await bundleForNode(part.file, `parts/${part.id}`);
    const module = (await import(`${pathToFileURL(bundle).href}?t=${Date.now()}`)) as { run?: (options: OrchestratedOptions) => Promise<Section> };
    if (typeof module.run !== "function") throw new Error(`${part.file} does not export a run function`);
    const section = await withTimeLimit(module.run({ quick: context.quick, log, earlier: context.earlier }), context.timeLimitS, part.id);
    checkSection(section, part);
    const chartErrors = await writeCharts(section.charts);
    log(`done in ${elapsed().toFixed(1)} s`);
    return { id: part.id, title: section.title, status: "ok", seconds: elapsed(), section, chartErrors };
  } catch (error) {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    log(`FAILED: ${text.split("\n")[0]}`);
    return { id: part.id, title: part.title, status: "failed", seconds: elapsed(), error: text, chartErrors: [] };
  }
}

function withTimeLimit<T>(promise: Promise<T>, seconds: number, id: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${id} did not finish within ${seconds} s`)), seconds * 1000);
    timer.unref();
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function checkSection(section: Section, part: PartEntry): void {
  if (!section || typeof section !== "object") throw new Error(`${part.file}: run() resolved to ${String(section)}, not a Section`);
  if (typeof section.markdown !== "string") throw new Error(`${part.file}: the section has no markdown`);
  if (!Array.isArray(section.charts)) throw new Error(`${part.file}: the section's charts is not an array`);
  section.title ||= part.title;
}

async function writeCharts(charts: ChartSpec[]): Promise<string[]> {
  const errors: string[] = [];
  for (const chart of charts) {
    try {
      if (!/^[\w.-]+$/.test(chart.file)) throw new Error(`chart file name ${JSON.stringify(chart.file)} is not a plain name`);
      await writeFile(join(CHARTS, `${chart.file}.svg`), renderChart(chart));
    } catch (error) {
      errors.push(`${chart.file}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return errors;
}

interface Machine {
  nproc: number;
  cpuModel: string;
  node: string;
  os: string;
  memoryGiB: number;
  versions: Record<string, string>;
  commit: string;
}

function machineInfo(): Machine {
  const nproc = Number(spawnSync("nproc").stdout?.toString().trim()) || cpus().length;
  const git = (args: string[]) => spawnSync("git", args, { cwd: ROOT }).stdout?.toString().trim() ?? "";
  const commit = git(["rev-parse", "--short", "HEAD"]);
  // The bench's own outputs are rewritten by every run; they say nothing about the code measured.
  const dirty = git(["status", "--porcelain", "--", ".", ":!bench/RESULTS.md", ":!bench/results.json", ":!bench/charts"]) ? " (with uncommitted changes)" : "";
  return {
    nproc,
    cpuModel: cpus()[0]?.model.trim() ?? "unknown",
    node: process.version,
    os: `${platform()} ${release()} ${arch()}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    versions: Object.fromEntries(["workerd", "miniflare", "wrangler", "esbuild", "autocannon", "ioredis", "rate-limiter-flexible"].map((name) => [name, packageVersion(name)])),
    commit: commit ? `${commit}${dirty}` : "unknown",
  };
}

function packageVersion(name: string): string {
  try {
    const text = spawnSync(process.execPath, ["-p", `require(${JSON.stringify(`${name}/package.json`)}).version`], { cwd: ROOT }).stdout?.toString().trim();
    return text || "not installed";
  } catch {
    return "not installed";
  }
}

function renderResults(outcomes: Outcome[], run: { command: string; quick: boolean; totalS: number; machine: Machine }): string {
  const m = run.machine;
  const lines = [
    "# floodgate benchmarks",
    "",
    `Generated ${new Date().toISOString().replace(/\.\d+Z$/, "Z")} by \`${run.command}\`${run.quick ? " (quick: smaller sizes, fewer repeats; indicative only)" : ""} in ${round1(run.totalS)} s. How to run and what each part measures: [README](README.md); raw numbers: [results.json](results.json).`,
    "",
    "| machine | |",
    "| --- | --- |",
    `| CPUs (\`nproc\`) | ${m.nproc} |`,
    `| CPU model | ${m.cpuModel} |`,
    `| memory | ${m.memoryGiB} GiB |`,
    `| Node | ${m.node} |`,
    `| OS | ${m.os} |`,
    `| packages | ${Object.entries(m.versions).map(([k, v]) => `${k} ${v}`).join(", ")} |`,
    `| commit | ${m.commit} |`,
    "",
    "| part | status | time |",
    "| --- | --- | ---: |",
    ...outcomes.map((o) => `| [${o.section?.title ?? o.title}](#${anchor(o.section?.title ?? o.title)}) | ${statusText(o.status)} | ${o.status === "ok" || o.status === "failed" || o.status === "kept" ? `${round1(o.seconds)} s` : "—"} |`),
  ];
  lines.push(...renderTargets(outcomes));
  for (const o of outcomes) {
    if (o.status === "skipped") continue;
    lines.push("", `## ${o.section?.title ?? o.title}`, "");
    if (o.status === "failed") {
      const [first, ...rest] = (o.error ?? "unknown error").split("\n");
      lines.push(`**Failed** after ${round1(o.seconds)} s: ${first}`);
      if (rest.length) lines.push("", "<details><summary>stack</summary>", "", "```", ...rest.map((l) => l.trim()), "```", "", "</details>");
      continue;
    }
    lines.push(o.section!.markdown.trim());
    if (o.chartErrors.length) lines.push("", `Charts that could not be drawn: ${o.chartErrors.join("; ")}`);
  }
  return `${lines.join("\n")}\n`;
}

/** "N of M targets met", over every part's verdicts. */
function targetsMet(outcomes: readonly Pick<Outcome, "section">[]): string {
  const verdicts = outcomes.flatMap((o) => o.section?.verdicts ?? []);
  return `${verdicts.filter((v) => v.met).length} of ${verdicts.length}`;
}

/** Every part's targets in one table, then why each missed one is missed. */
function renderTargets(outcomes: Outcome[]): string[] {
  const verdicts = outcomes.flatMap((o) => (o.section?.verdicts ?? []).map((v) => ({ part: o.section!.title, ...v })));
  if (verdicts.length === 0) return [];
  const word = (met: boolean | undefined) => (met === undefined ? "not read" : met ? "met" : "**missed**");
  const missed = verdicts.filter((v) => v.met === false);
  return [
    "",
    "## Targets",
    "",
    `${targetsMet(outcomes)} met on this run. Each is measured in the part named, which gives its method, repeats and the command that reproduces it.`,
    "",
    table(["target", "this run", "verdict", "part"], verdicts.map((v) => [v.target, v.measured, word(v.met), `[${v.part}](#${anchor(v.part)})`]), ["l", "l", "l", "l"]),
    ...(missed.length ? ["", ...missed.map((v) => `- **Missed: ${v.target}.** ${sentence(v.why ?? "the part's section says why")}`)] : []),
  ];
}

function sentence(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}${text.endsWith(".") ? "" : "."}`;
}

const STANDING_START = "<!-- standing: written by `npm run bench` from bench/RESULTS.md; edits here are overwritten -->";
const STANDING_END = "<!-- /standing -->";

/**
 * Rewrites the README's three lines on where floodgate stands from the parts' headlines, after a
 * full-size run in which every part ran or was kept: figures in the README come from a run, never from a hand.
 */
async function updateStanding(outcomes: Outcome[]): Promise<void> {
  const block = standingBlock(outcomes);
  if (!block) {
    console.error("bench: README's standing left as it was: not every part produced its headline");
    return;
  }
  const path = join(ROOT, "README.md");
  const updated = withStanding(await readFile(path, "utf8"), block);
  if (updated === undefined) console.error("bench: README.md has no standing markers; its standing was not written");
  else await writeFile(path, updated);
}

/** The README's standing, markers included; undefined unless every part it quotes gave a headline. */
export function standingBlock(outcomes: readonly Pick<Outcome, "id" | "status" | "section">[]): string | undefined {
  const headline = (id: string) => outcomes.find((o) => o.id === id && (o.status === "ok" || o.status === "kept"))?.section?.headline;
  const parts = ["accuracy", "fast-path", "decision-cost", "end-to-end", "cost"].map(headline);
  if (parts.some((h) => h === undefined)) return undefined;
  const [accuracy, fastPath, decisionCost, endToEnd, cost] = parts as string[];
  return [
    STANDING_START,
    `- **Accuracy.** Strict mode admits exactly the limit. ${accuracy} ${fastPath}`,
    `- **Speed.** ${decisionCost} ${endToEnd}`,
    `- **Cost.** ${cost} ${targetsMet(outcomes)} targets met; the misses and why: [Targets](bench/RESULTS.md#targets).`,
    STANDING_END,
  ].join("\n");
}

/** `readme` with the text between its standing markers replaced by `block`; undefined when it has no markers. */
export function withStanding(readme: string, block: string): string | undefined {
  const start = readme.indexOf(STANDING_START);
  const end = readme.indexOf(STANDING_END, start);
  if (start < 0 || end < 0) return undefined;
  return readme.slice(0, start) + block + readme.slice(end + STANDING_END.length);
}

function statusText(status: Status): string {
  return { ok: "ok", failed: "**failed**", placeholder: "not yet measured", skipped: "skipped (--only)", kept: "kept from the run before (--only)" }[status];
}

/** The parts of the run that wrote bench/RESULTS.md and bench/results.json; none when either is missing. */
async function lastRun(): Promise<Map<string, KeptPart>> {
  const read = (file: string) => readFile(join(ROOT, file), "utf8").catch(() => undefined);
  const [markdown, json] = await Promise.all([read("bench/RESULTS.md"), read("bench/results.json")]);
  return markdown === undefined || json === undefined ? new Map() : keptParts(markdown, json);
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function anchor(title: string): string {
  return title.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
