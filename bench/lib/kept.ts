/** What `npm run bench -- --only` keeps of the parts it does not run: each as the last run left it in RESULTS.md and results.json. */
import type { ChartSpec, Section, Verdict } from "./section";

/** One part as results.json stores it. */
interface StoredPart {
  id: string;
  title: string;
  status: string;
  seconds: number;
  charts?: ChartSpec[];
  verdicts?: Verdict[];
  headline?: string | null;
  data?: unknown;
}

/** A part of the last run: its time, and its section with the markdown RESULTS.md gave it. */
export interface KeptPart {
  seconds: number;
  section: Section;
}

/** The results file's run: when, by which command, at which commit. */
interface StoredRun {
  generatedAt?: string;
  command?: string;
  machine?: { commit?: string };
  parts?: StoredPart[];
}

/**
 * The last run's parts by id, each with its section's markdown: the lines after its `## <title>`
 * heading in `markdown` up to the next part's heading. A section that does not yet say where it
 * comes from (its first line in italics) is told: that run's command, commit and day. A part whose
 * heading is missing is left out, and so is everything when `json` is not the results file (the
 * part then reads as skipped).
 */
export function keptParts(markdown: string, json: string): Map<string, KeptPart> {
  let run: StoredRun;
  try {
    run = JSON.parse(json) as StoredRun;
  } catch {
    return new Map();
  }
  const parts = run.parts ?? [];
  const from = `*From \`${run.command ?? "npm run bench"}\` at commit ${run.machine?.commit ?? "unknown"}, ${run.generatedAt?.slice(0, 10) ?? "on an unknown day"}.*`;
  const lines = markdown.split("\n");
  const headings = new Set(parts.map((p) => `## ${p.title}`));
  const kept = new Map<string, KeptPart>();
  for (const part of parts) {
    const start = lines.indexOf(`## ${part.title}`);
    if (start < 0) continue;
    const next = lines.findIndex((line, i) => i > start && headings.has(line));
    const text = lines.slice(start + 1, next < 0 ? lines.length : next).join("\n").trim();
    const body = /^\*[^*]/.test(text) ? text : `${from}\n\n${text}`;
    kept.set(part.id, {
      seconds: part.seconds,
      section: { id: part.id, title: part.title, markdown: body, charts: part.charts ?? [], data: part.data ?? null, verdicts: part.verdicts ?? [], ...(part.headline ? { headline: part.headline } : {}) },
    });
  }
  return kept;
}
