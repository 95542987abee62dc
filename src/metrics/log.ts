/** Structured log lines for Workers Logs and `wrangler tail`: one JSON object per event, rate-capped so a flood cannot run up the log bill. */
import { decide, type LimiterState, type Policy } from "../algorithms";
import { metrics } from "./metrics";

/** Lines each kind of event may write per isolate per second (a token bucket, so a short burst of this many passes). */
const LINES_PER_SECOND = 10;

const allowance: Policy = { algorithm: "token-bucket", limit: LINES_PER_SECOND, periodMs: 1_000, burst: LINES_PER_SECOND, buckets: 1 };

interface Kind {
  allowance: LimiterState | undefined;
  /** lines left out since the last one written; the next one says how many */
  dropped: number;
}

/**
 * Writes `{ event, ...fields }` as one JSON line on the console, unless its kind has used up its lines for
 * this second; what is left out is counted in `floodgate_log_lines_dropped_total{event}` and in
 * the `dropped` field of the kind's next line. Callers pass no raw key, token or header value.
 *
 * @example
 * log.event("dry_run_denied", { rule: "api", reason: "limit", retryAfterMs: 1200 }, Date.now());
 * // {"event":"dry_run_denied","rule":"api","reason":"limit","retryAfterMs":1200}
 */
class Log {
  private readonly kinds = new Map<string, Kind>();

  event(event: string, fields: Record<string, unknown>, now: number): void {
    // Each kind of error has its own lines: a flood of origin failures must not hide the Durable Object's.
    this.admit(event, now, event === "error" && typeof fields.kind === "string" ? `error:${fields.kind}` : event)?.(fields);
  }

  /**
   * A writer for one line of this kind, or undefined (and the line counted as dropped) when the
   * kind (`allowanceOf`, the event unless told) has used up its lines: for a line whose fields take
   * work to make, such as a key's hash.
   */
  admit(event: string, now: number, allowanceOf = event): ((fields: Record<string, unknown>) => void) | undefined {
    let kind = this.kinds.get(allowanceOf);
    if (!kind) this.kinds.set(allowanceOf, (kind = { allowance: undefined, dropped: 0 }));
    const { decision, state } = decide(allowance, kind.allowance, 1, now);
    kind.allowance = state;
    if (!decision.allowed) {
      kind.dropped++;
      metrics.count("floodgate_log_lines_dropped_total", { event });
      return undefined;
    }
    const dropped = kind.dropped;
    kind.dropped = 0;
    return (fields) => writeLine({ event, ...fields, ...(dropped > 0 ? { dropped } : {}) });
  }
}

/**
 * One JSON line on the console, an error's at the error level: Workers Logs indexes a JSON line's
 * fields as it does a logged object's, and every console (`wrangler dev`, `wrangler tail`, a
 * terminal) shows it as one line, where an object is printed over several.
 */
function writeLine(line: Record<string, unknown>): void {
  const text = JSON.stringify(line);
  if (line.event === "error") console.error(text);
  else if (line.event === "warning") console.warn(text);
  else console.log(text);
}

/** The isolate's log. */
export const log = new Log();

/** Warning lists already logged: the settings keep one list until the configuration changes. */
const warned = new WeakSet<readonly Error[]>();

/**
 * Logs each of the configuration's warnings (what is set but has no effect) as one line at the
 * warning level, once per reading of the configuration: once per isolate, not once per request.
 */
export function warnOnce(warnings: readonly Error[]): void {
  if (warnings.length === 0 || warned.has(warnings)) return;
  warned.add(warnings);
  for (const warning of warnings) log.event("warning", { kind: "config", message: warning.message }, Date.now());
}

/** Errors already logged: every request that rode a failed batch call is rejected with the call's one error. */
const logged = new WeakSet<object>();

/**
 * Counts a failure in `floodgate_errors_total` under `kind` for each request it reaches, and logs
 * it once: one failed call is one line, however many requests it answered. For work whose failure
 * the request does not see.
 */
export function countError(kind: string, rule?: { name: string }): (error: unknown) => void {
  return (error) => {
    metrics.count("floodgate_errors_total", { kind });
    if (typeof error === "object" && error !== null) {
      if (logged.has(error)) return;
      logged.add(error);
    }
    // The rule tells an operator with many rules whose objects are failing.
    log.event("error", { kind, ...(rule ? { rule: rule.name } : {}), message: error instanceof Error ? error.message : String(error) }, Date.now());
  };
}
