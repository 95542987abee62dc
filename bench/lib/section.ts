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

/** One part's results: markdown for bench/RESULTS.md, its charts, and the raw numbers for bench/results.json. */
export interface Section {
  id: string;
  title: string;
  /** refers to its charts as `![<title>](charts/<file>.svg)` */
  markdown: string;
  charts: ChartSpec[];
  data: unknown;
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
