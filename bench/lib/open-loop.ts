/** Open-loop HTTP load: requests sent at a fixed arrival rate whatever the answers, latency timed from when each was due. */
import { Agent, request } from "node:http";

/** One request's fate: its status (0 when it got no answer in time) and ms from when it was due to its answer's end. */
export interface Sample {
  status: number;
  latencyMs: number;
}

export interface OpenLoopOptions {
  /** the servers, sent to in turn */
  targets: URL[];
  /** path and query of every request */
  path: string;
  /** requests per second, over all targets */
  rate: number;
  seconds: number;
  /** a request with no answer this long after it was due counts as unanswered (status 0) */
  giveUpMs: number;
}

/**
 * Sends `rate × seconds` GETs, the n-th due at n / rate s, and resolves once every one is answered
 * or given up on. Timing from when a request was due, not from when it went out, charges a late
 * send to the server that made the generator late (no coordinated omission). Each target gets its
 * own keep-alive agent with room for every request that may be in flight at once.
 */
export async function openLoop(options: OpenLoopOptions): Promise<Sample[]> {
  const { targets, path, rate, seconds, giveUpMs } = options;
  const total = Math.round(rate * seconds);
  const perTarget = Math.ceil((rate * (giveUpMs / 1000 + 1)) / targets.length);
  const agents = targets.map(() => new Agent({ keepAlive: true, maxSockets: Math.max(8, perTarget) }));
  const samples: Promise<Sample>[] = [];
  const start = performance.now();
  try {
    while (samples.length < total) {
      const elapsed = performance.now() - start;
      while (samples.length < total && (samples.length * 1000) / rate <= elapsed) {
        const n = samples.length;
        samples.push(send(targets[n % targets.length]!, path, agents[n % targets.length]!, start + (n * 1000) / rate, giveUpMs));
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return await Promise.all(samples);
  } finally {
    for (const agent of agents) agent.destroy();
  }
}

function send(target: URL, path: string, agent: Agent, dueAt: number, giveUpMs: number): Promise<Sample> {
  return new Promise((resolve) => {
    const done = (status: number) => resolve({ status, latencyMs: performance.now() - dueAt });
    const req = request({ host: target.hostname, port: target.port, path, agent }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode ?? 0));
      res.on("error", () => done(0));
    });
    req.setTimeout(Math.max(1, dueAt + giveUpMs - performance.now()), () => req.destroy());
    req.on("error", () => done(0));
    req.end();
  });
}
