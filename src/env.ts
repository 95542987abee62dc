/** The bindings floodgate reads, as wrangler.toml and the dashboard provide them. */
import type { RateLimiter } from "./durable-object/rate-limiter";

export interface Env {
  LIMITER: DurableObjectNamespace<RateLimiter>;
  /** the origin to protect; "demo" serves the built-in echo origin; absent: every request answers 500 */
  ORIGIN_URL?: string;
  /** the rules: a JSON string, or the object wrangler makes of a TOML table */
  RATE_LIMIT_RULES?: unknown;
  /** enables the admin API when set */
  ADMIN_TOKEN?: string;
  /** fast mode: how many keys one isolate tracks (default 20000) */
  FAST_MAX_KEYS?: string;
  /**
   * the `RateLimit*` fields responses carry: "draft-10" (the default: `RateLimit-Policy` and
   * `RateLimit` as structured fields), "draft-7", "draft-6" or "none"
   */
  RATE_LIMIT_HEADERS?: string;
  /** whether responses carry `X-RateLimit-Limit`, `-Remaining` and `-Reset`: "true" (the default) or "false"; a TOML boolean too */
  LEGACY_HEADERS?: string | boolean;
  /** "true" puts every rule in shadow mode, as `dryRun: true` on each: "false" (the default) or unset enforces them as written; a TOML boolean too */
  DRY_RUN?: string | boolean;
  /** addresses and CIDRs (comma-separated, v4 and v6) never limited by any rule */
  ALLOW_IPS?: string;
  /** addresses and CIDRs (comma-separated, v4 and v6) answered 403 before anything else; wins over ALLOW_IPS */
  DENY_IPS?: string;
  /** optional Workers Analytics Engine dataset: one point per decision */
  ANALYTICS?: AnalyticsEngineDataset;
  /** the share of decisions written to ANALYTICS, 0 to 1 (default 1) */
  ANALYTICS_SAMPLE?: string | number;
  /** secret: keys are written to ANALYTICS and the logs only as their HMAC-SHA-256 under it */
  ANALYTICS_HASH_KEY?: string;
}
