/** The contract between the benchmark orchestrator (bench/run.mjs) and each measurement part. */

/** A chart the orchestrator renders to `bench/charts/<file>.svg`. */
export interface ChartSpec {
  /** file name without extension, e.g. "accuracy-boundary" */
  file: string;
  title: string;
  kind: "line" | "bar";
  xLabel: string;
  yLabel: string;
  /** bar charts: the category names; a point's x is the category's index */
  categories?: string[];
  series: { name: string; points: [number, number][] }[];
}

/** One of the targets as a run measured it: the orchestrator gathers them into one table. */
export interface Verdict {
  target: string;
  measured: string;
  /** undefined: not read on this run (quick sizes, or a measurement that cannot tell) */
  met: boolean | undefined;
  /** for a missed target: why, from the run's own numbers */
  why?: string;
}

/** One part's results: markdown for bench/RESULTS.md, its charts, and the raw numbers for bench/results.json. */
export interface Section {
  id: string;
  title: string;
  /** refers to its charts as `![<title>](charts/<file>.svg)` */
  markdown: string;
  charts: ChartSpec[];
  data: unknown;
  /** the part's targets, as measured */
  verdicts?: Verdict[];
  /** one sentence on where floodgate stands on this part's ground, with this run's figures: the README quotes it */
  headline?: string;
}

/** What the orchestrator passes to every part's `run`. */
export interface RunOptions {
  /** `npm run bench -- --quick`: smaller sizes and fewer repeats, for a run of a minute or so */
  quick: boolean;
  /** smoke-test size: a few seconds, numbers meaningless beyond "it starts and produces numbers" */
  tiny?: boolean;
  log: (line: string) => void;
}

/** Every part exports one of these as `run`. */
export type Part = (options: RunOptions) => Promise<Section>;
