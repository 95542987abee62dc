// Builds Rule objects for tests: sensible defaults, override only what the test is about.
import type { Rule } from "../../src/config/types";

/**
 * A `timeout` for a rule whose test asserts what its first requests are answered and is not about the timeout.
 * A fresh rule's first call starts its object, and on a loaded machine has passed the default 1 s: onError `local`
 * then refuses as a cold start (README, *Why `onError: local` is the default*), which is the product's answer to a
 * slow object, not the answer such a test checks. Rules whose tests exercise the default keep it.
 */
export const PATIENT_TIMEOUT = "10s";

/** Overrides for {@link rule}; `match` may be partial. */
export type RuleOverrides = Partial<Omit<Rule, "match">> & { match?: Partial<Rule["match"]> };

/**
 * A complete, valid Rule as the config parser would produce it.
 *
 * @example
 * rule({ name: "login", match: { path: "/login", methods: ["POST"] }, limit: 5 });
 */
export function rule(overrides: RuleOverrides = {}): Rule {
  const { match, ...rest } = overrides;
  return {
    name: "test",
    key: [{ source: "ip" }],
    algorithm: "sliding-window",
    limit: 10,
    periodMs: 60_000,
    burst: rest.limit ?? 10,
    buckets: 1,
    cost: { units: 1 },
    mode: "strict",
    syncMs: 1_000,
    onError: "local",
    timeoutMs: 1_000,
    ipv6Prefix: 56,
    newKeysPerSecond: null,
    dryRun: false,
    blockMs: null,
    count: "all",
    // The parser's default for a fast rule; `aggregate: undefined` is its "none".
    ...(rest.mode === "fast" && !("aggregate" in rest) ? { aggregate: "auto" as const } : {}),
    ...rest,
    match: { path: "*", methods: null, host: null, ips: null, ...match },
  };
}
