/** The answer to a request whose handling threw: its problem, the configuration's 500, or an internal 500 with the error logged. */
import { ConfigError } from "../config/errors";
import { log } from "../metrics/log";
import { metrics } from "../metrics/metrics";
import { HttpProblem, invalidConfig } from "./problem";

/** What to answer for `error`, thrown while handling a request: a config error and an internal one are counted and logged. */
export function failureResponse(error: unknown): Response {
  if (error instanceof HttpProblem) return error.toResponse();
  if (error instanceof ConfigError) {
    metrics.count("floodgate_errors_total", { kind: "config" });
    log.event("error", { kind: "config", message: error.message }, Date.now());
    return invalidConfig(error.message).toResponse();
  }
  metrics.count("floodgate_errors_total", { kind: "internal" });
  log.event("error", { kind: "internal", message: error instanceof Error ? error.message : String(error), ...(error instanceof Error && error.stack ? { stack: error.stack } : {}) }, Date.now());
  return new HttpProblem({
    type: "about:blank",
    status: 500,
    title: "Internal Server Error",
    detail: "floodgate failed to handle this request; the error is logged.",
  }).toResponse();
}
