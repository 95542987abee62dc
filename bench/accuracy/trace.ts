/**
 * A synthetic request trace for the accuracy study: deterministic from its seed, generated one source at a time.
 *
 * Per-key limiters never look at other keys, so replaying the trace source by source gives exactly the
 * decisions a time-ordered replay would, while holding only one source's timestamps in memory.
 */
import { mix32, Random } from "../lib/random";

export interface TraceConfig {
  seed: number;
  sources: number;
  /** how many periods the trace lasts */
  periods: number;
  limit: number;
  periodMs: number;
  /** epoch ms the trace starts at, a multiple of the period (windows are epoch-aligned) */
  start: number;
}

/** What kind of client a source is; each kind is drawn with the share given in {@link CLASS_SHARES}. */
export type SourceClass = "ordinary" | "periodic" | "near-limit" | "edge-burst" | "abuser";

export const SOURCE_CLASSES: readonly SourceClass[] = ["ordinary", "periodic", "near-limit", "edge-burst", "abuser"];

export const CLASS_SHARES: Record<SourceClass, number> = {
  ordinary: 0.925,
  periodic: 0.03,
  "near-limit": 0.03,
  "edge-burst": 0.01,
  abuser: 0.005,
};

/** One line per class, for the report: how its requests are drawn (L = the limit, P = the period). */
export const CLASS_DESCRIPTIONS: Record<SourceClass, string> = {
  ordinary:
    "rate per period drawn from a Pareto law (shape 1.5, minimum 2, capped at 20 L): most send a few requests a minute, " +
    "a heavy tail sends more than the limit; 65 % arrive as a Poisson stream, 35 % in clumps (sessions: a geometric " +
    "number of requests, mean 8, 400 ms apart on average)",
  periodic:
    "a scripted client: a batch of 0.3–0.9 L requests once a period at its own phase (± 0.5 s of jitter), spread over " +
    "0.2–2 s: within the limit per period, though jitter can bring the tails of two batches into one sliding period",
  "near-limit": "a Poisson stream at 0.8–1.25 L per period: hovers around the limit",
  "edge-burst":
    "a low background (1–10 per period) plus, at 70 % of the window boundaries, 0.5–1 L requests in the last 0.5–3 s " +
    "before the boundary and as many again just after it: the burst a fixed window lets through twice",
  abuser: "a steady Poisson stream at 1.5–10 L per period (log-uniform)",
};

/** A growable buffer of one source's timestamps, reused from source to source. */
export class TimeBuffer {
  times = new Float64Array(1 << 16);
  length = 0;

  push(t: number): void {
    if (this.length === this.times.length) {
      const bigger = new Float64Array(this.times.length * 2);
      bigger.set(this.times);
      this.times = bigger;
    }
    this.times[this.length++] = t;
  }

  /** The timestamps so far, sorted ascending, as a view (valid until the next source). */
  sorted(): Float64Array {
    return this.times.subarray(0, this.length).sort();
  }
}

/** Fills `out` with source `id`'s request times (integer epoch ms, sorted) and returns its class. */
export function generateSource(config: TraceConfig, id: number, out: TimeBuffer): SourceClass {
  const random = new Random(mix32(config.seed, id));
  const cls = pickClass(random.next());
  const { limit: L, periodMs: P, start } = config;
  const end = start + config.periods * P;
  out.length = 0;
  const poisson = (perPeriod: number, from = start, to = end) => {
    if (perPeriod <= 0) return;
    const mean = P / perPeriod;
    for (let t = from + random.exponential(mean); t < to; t += random.exponential(mean)) out.push(Math.floor(t));
  };
  const spread = (n: number, from: number, width: number) => {
    for (let i = 0; i < n; i++) {
      const t = Math.floor(from + random.next() * width);
      if (t >= start && t < end) out.push(t);
    }
  };

  switch (cls) {
    case "ordinary": {
      const perPeriod = Math.min(random.pareto(1.5, 2), 20 * L);
      if (random.next() < 0.65) {
        poisson(perPeriod);
      } else {
        // Sessions: clumps of requests close together, clump starts a Poisson stream.
        const clumpMean = 8;
        const clumpGapMs = 400;
        const meanBetweenClumps = (P * clumpMean) / perPeriod;
        for (let t = start + random.exponential(meanBetweenClumps); t < end; t += random.exponential(meanBetweenClumps)) {
          const size = 1 + Math.floor(Math.log(1 - random.next()) / Math.log(1 - 1 / clumpMean));
          let at = t;
          for (let i = 0; i < size && at < end; i++, at += random.exponential(clumpGapMs)) out.push(Math.floor(at));
        }
      }
      break;
    }
    case "periodic": {
      const batch = Math.round(random.uniform(0.3, 0.9) * L);
      const phase = random.uniform(0, P);
      const width = random.uniform(200, 2_000);
      for (let k = 0; k < config.periods; k++) spread(batch, start + k * P + phase + random.uniform(-500, 500), width);
      break;
    }
    case "near-limit":
      poisson(random.uniform(0.8, 1.25) * L);
      break;
    case "edge-burst": {
      poisson(random.uniform(1, 10));
      for (let k = 1; k < config.periods; k++) {
        if (random.next() >= 0.7) continue;
        const boundary = start + k * P;
        const width = random.uniform(500, 3_000);
        spread(Math.round(random.uniform(0.5, 1) * L), boundary - width, width);
        spread(Math.round(random.uniform(0.5, 1) * L), boundary, width);
      }
      break;
    }
    case "abuser":
      poisson(random.logUniform(1.5 * L, 10 * L));
      break;
  }
  return cls;
}

function pickClass(u: number): SourceClass {
  let acc = 0;
  for (const cls of SOURCE_CLASSES) {
    acc += CLASS_SHARES[cls];
    if (u < acc) return cls;
  }
  return "ordinary";
}
