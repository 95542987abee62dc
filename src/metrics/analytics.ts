/** Workers Analytics Engine: one sampled data point per rule decision, written off the response's path, the key only as a keyed hash. */
import type { Decision } from "../algorithms";
import type { Rule } from "../config/types";
import { countError } from "./log";

/** Where points go, and how: the `ANALYTICS` dataset, `ANALYTICS_SAMPLE` (0–1) and the `ANALYTICS_HASH_KEY` secret. */
export interface AnalyticsSettings {
  dataset: AnalyticsEngineDataset;
  sample: number;
  hashKey: string;
}

/** One decision to record: the rule, what it decided and for which key, and the outcome as counted. */
export interface DecisionPoint {
  rule: Rule;
  decision: Pick<Decision, "remaining"> & { reason?: string };
  key: string;
  cost: number;
  /** `allowed`, `denied` or `dry_run_denied`, as in floodgate_decisions_total */
  outcome: string;
}

/**
 * Writes the point with probability `sample`, in `waitUntil` (hashing the key is asynchronous):
 * index1 the rule; blob1–6 rule, outcome, reason, mode, algorithm, key hash; double1–3 cost,
 * remaining, and the point's weight 1 / sample, so `SUM(_sample_interval * double3)` counts
 * decisions whatever the sampling. A write that fails is counted and logged, and never touches the request.
 */
export function recordDecision(analytics: AnalyticsSettings, point: DecisionPoint, waitUntil: (promise: Promise<unknown>) => void): void {
  if (analytics.sample <= 0 || (analytics.sample < 1 && Math.random() >= analytics.sample)) return;
  const { rule, decision, key, cost, outcome } = point;
  const write = Promise.resolve(analytics.hashKey).then((secret) => keyHash(secret, key)).then((hash) => {
    analytics.dataset.writeDataPoint({
      indexes: [rule.name],
      blobs: [rule.name, outcome, decision.reason ?? "", rule.mode, rule.algorithm, hash],
      doubles: [cost, decision.remaining, 1 / analytics.sample],
    });
  });
  waitUntil(write.catch(countError("analytics", rule)));
}

const keys = new Map<string, Promise<CryptoKey>>();

/**
 * HMAC-SHA-256 of the key under the secret, in hex: what the dataset and the logs hold instead of
 * the key. An operator who knows a key finds its points and lines with
 * `printf '%s' "<key>" | openssl dgst -sha256 -hmac "$ANALYTICS_HASH_KEY" -r` (its first field). Without a secret (logs
 * only, no ANALYTICS_HASH_KEY set) it is the key's plain SHA-256, which hides API keys but not
 * addresses, whose space is small enough to try in full.
 */
export async function keyHash(secret: string | undefined, key: string): Promise<string> {
  const data = new TextEncoder().encode(key);
  if (!secret) return hex(await crypto.subtle.digest("SHA-256", data));
  let imported = keys.get(secret);
  if (!imported) {
    imported = crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    if (keys.size > 8) keys.clear();
    keys.set(secret, imported);
  }
  return hex(await crypto.subtle.sign("HMAC", await imported, data));
}

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}
