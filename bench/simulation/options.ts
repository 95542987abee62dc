/** `npm run simulate` options: parsed and validated once, every message naming the option and what to write. */
import { cpus } from "node:os";

export interface Options {
  quick: boolean;
  seed: number;
  /** seeds the targets are read on, from `seed` up: the scenarios they read run once more for each after the first */
  seeds: number;
  /** isolate counts for the families that sweep them; undefined: 8, 64, 512 and 4,096 */
  isolates: number[] | undefined;
  /** scenario names, family names, or globs with `*`; undefined: every scenario */
  only: string[] | undefined;
  /** where SIMULATION.md, simulation.json and charts/simulation/ go */
  out: string | undefined;
  /** worker threads running scenarios side by side */
  jobs: number;
  /** override every scenario's simulated duration, in seconds (smoke tests) */
  seconds: number | undefined;
  help: boolean;
}

export const USAGE = `usage: npm run simulate -- [options]

  --quick              shorter runs and fewer strict loads: under a minute, indicative only
  --seed <n>           the random seed (a non-negative integer; default 1)
  --seeds <n>          read the targets on this many seeds, from --seed up: the scenarios they read
                       run again with each (1 to 10; default 3, or 1 with --quick)
  --isolates <list>    isolate counts for the families that sweep them, e.g. 8,64 (default 8,64,512,4096)
  --only <list>        scenario names, family names or globs, e.g. global-fast or 'strict-hot-*'
  --out <dir>          where SIMULATION.md, simulation.json and charts/simulation/ go (default bench/)
  --jobs <n>           scenarios run side by side in worker threads (default: the number of cores, at most 2)
  --seconds <n>        simulated seconds of every scenario, overriding its own (for smoke tests)
  --help               this text`;

/** A bad option: its message names the option and says what to write. */
export class OptionError extends Error {
  override readonly name = "OptionError";
}

const MAX_ISOLATES = 20_000;

export function parseOptions(argv: readonly string[]): Options {
  const options: Options = { quick: false, seed: 1, seeds: 0, isolates: undefined, only: undefined, out: undefined, jobs: Math.max(1, Math.min(2, cpus().length)), seconds: undefined, help: false };
  const seen = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || (inline === undefined && v.startsWith("--"))) throw new OptionError(`${flag}: needs a value (${USAGE.split("\n").find((l) => l.trim().startsWith(flag))?.trim() ?? flag})`);
      return v;
    };
    if (seen.has(flag) && flag.startsWith("--")) throw new OptionError(`${flag}: given twice; give it once`);
    seen.add(flag);
    switch (flag) {
      case "--quick":
        if (inline !== undefined) throw new OptionError(`--quick: takes no value, got "${inline}"`);
        options.quick = true;
        break;
      case "--help":
      case "-h":
        options.help = true;
        break;
      case "--seed":
        options.seed = integer("--seed", value(), 0, 2 ** 32 - 1, "a non-negative integer below 2^32, e.g. --seed 7");
        break;
      case "--seeds":
        options.seeds = integer("--seeds", value(), 1, 10, "how many seeds to read the targets on, 1 to 10, e.g. --seeds 3");
        break;
      case "--isolates":
        options.isolates = list("--isolates", value()).map((v) => integer("--isolates", v, 1, MAX_ISOLATES, `positive integers up to ${MAX_ISOLATES.toLocaleString("en-US")} separated by commas, e.g. --isolates 8,64`));
        break;
      case "--only":
        options.only = list("--only", value());
        break;
      case "--out": {
        const v = value();
        if (v.trim() === "") throw new OptionError(`--out: expected a directory, got an empty string`);
        options.out = v;
        break;
      }
      case "--jobs":
        options.jobs = integer("--jobs", value(), 1, 64, "a positive integer, e.g. --jobs 2");
        break;
      case "--seconds":
        options.seconds = number("--seconds", value(), 1, 3_600, "simulated seconds between 1 and 3600, e.g. --seconds 20");
        break;
      default:
        throw new OptionError(`${arg}: unknown option; the options are --quick, --seed, --seeds, --isolates, --only, --out, --jobs, --seconds and --help`);
    }
  }
  if (options.seeds === 0) options.seeds = options.quick ? 1 : 3;
  if (options.seed + options.seeds - 1 > 2 ** 32 - 1) throw new OptionError(`--seeds: ${options.seeds} seeds from --seed ${options.seed} go past 2^32 - 1; give a smaller --seed or fewer --seeds`);
  return options;
}

function list(flag: string, raw: string): string[] {
  const items = raw.split(",").map((s) => s.trim());
  if (items.some((s) => s === "")) throw new OptionError(`${flag}: expected a comma-separated list with no empty items, got "${raw}"`);
  return items;
}

function integer(flag: string, raw: string, min: number, max: number, want: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new OptionError(`${flag}: expected ${want}; got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new OptionError(`${flag}: expected ${want}; got ${raw}`);
  return n;
}

function number(flag: string, raw: string, min: number, max: number, want: string): number {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < min || n > max) throw new OptionError(`${flag}: expected ${want}; got "${raw}"`);
  return n;
}
