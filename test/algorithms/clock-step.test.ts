// A clock stepped back behind a key's state (another machine's clock): each algorithm decides at the state's time, and says how long to wait from now.
import { describe, expect, it } from "vitest";
import { decide, type Policy } from "../../src/algorithms";

const T0 = 1_700_000_040_000;
const base = { limit: 1, periodMs: 1_000, burst: 1, buckets: 1 };
const policies: Policy[] = [
  { ...base, algorithm: "sliding-window" },
  { ...base, algorithm: "sliding-window", buckets: 4 },
  { ...base, algorithm: "fixed-window" },
  { ...base, algorithm: "sliding-log" },
  { ...base, algorithm: "token-bucket" },
  { ...base, algorithm: "token-bucket", warmupMs: 10_000 },
  { ...base, algorithm: "gcra", burst: 0 },
];

describe("a clock stepped back behind the state", () => {
  it.each(policies.map((p) => [`${p.algorithm}${p.warmupMs ? " with warmup" : ""}${p.buckets > 1 ? ` of ${p.buckets} buckets` : ""}`, p] as const))(
    "%s: admits the denied request again exactly retryAfter from now, not before",
    (_name, policy) => {
      const { state } = decide(policy, undefined, 1, T0);
      const now = T0 - 500;
      const denied = decide(policy, state, 1, now).decision;
      expect(denied.allowed).toBe(false);
      expect(decide(policy, state, 1, now + denied.retryAfter).decision.allowed).toBe(true);
      expect(decide(policy, state, 1, now + denied.retryAfter - 1).decision.allowed).toBe(false);
    },
  );
});
