/** The shapes every algorithm shares: the policy it enforces, its state, and the decision it returns. */

export type AlgorithmName = "sliding-window" | "token-bucket" | "fixed-window" | "sliding-log" | "gcra" | "concurrency";

/** What an algorithm needs to know about a rule: no names, no matching, just the arithmetic. */
export interface Policy {
  algorithm: AlgorithmName;
  /**
   * sliding-window, fixed-window, sliding-log: most units per period; token-bucket: units refilled
   * per period; gcra: units emitted per period (one every periodMs / limit); concurrency: most
   * units in flight.
   */
  limit: number;
  /** concurrency: the slot TTL, the longest a slot is held when it is never given back; a fixed window with `months`: its longest window, 31 days a month */
  periodMs: number;
  /** fixed-window only: the windows are calendar months, UTC, this many to a window (12: a year), each starting on the 1st at 00:00 */
  months?: number;
  /** token-bucket capacity; gcra tolerance in units (0 or more); equals `limit` for the windows and the log. */
  burst: number;
  /** sliding-window: how many buckets the period is split into (1: the classic two-window counter) */
  buckets: number;
  /**
   * gcra only: of the `burst`, how many units pass at once; a conforming request past them is held
   * (see {@link Decision.holdMs}). Absent: `burst`, so nothing is held.
   */
  delay?: number;
  /** the rule's `block`: once a request is denied at the limit, every request is denied for this long (see ./block) */
  blockMs?: number;
  /** token-bucket only: after an idle spell the refill starts at a third of the rate and climbs to it over this long (see ./warmup) */
  warmupMs?: number;
}

/** Why a decision came out as it did, when that is not simply "the counter said so". */
export type Reason =
  /** the key's counter is at its limit */
  | "limit"
  /** the request alone costs more than the rule can ever admit */
  | "cost-exceeds-capacity"
  /** decided in the isolate from local counters (fast mode) */
  | "local"
  /** denied from the isolate's cache of keys the Durable Object reported blocked */
  | "cache"
  /** the Durable Object failed and the rule's error policy decided */
  | "error"
  /** the key is blocked: the rule denied it, and its `block` has not yet passed */
  | "blocked";

/**
 * The result of one decision, the same for every algorithm and every path (strict or fast).
 *
 * @example
 * { allowed: false, limit: 10, remaining: 0, resetAt: 1_700_000_060_000, moreAt: 1_700_000_004_200, retryAfter: 4_200, reason: "limit" }
 */
export interface Decision {
  /** whether the request may proceed */
  allowed: boolean;
  /** the rule's `limit` */
  limit: number;
  /** whole units still available after this decision (0 when denied at the limit) */
  remaining: number;
  /** epoch ms at which the key is back to its full quota if it sends nothing more */
  resetAt: number;
  /**
   * epoch ms at which `remaining` next grows by a unit if the key sends nothing more (the next
   * token; the oldest counted units leaving the window); equal to the decision's time when the key
   * is at its full quota. What a `RateLimit` header's `t` counts down to.
   */
  moreAt: number;
  /** ms to wait before this same request would be admitted; 0 when allowed */
  retryAfter: number;
  /** set when the answer needs explaining; see {@link Reason} */
  reason?: Reason;
  /**
   * gcra with a `delay` below its `burst`: ms the request must be held before it is proxied (it is
   * admitted, and counted, now). Absent or 0: at once.
   */
  holdMs?: number;
}

/**
 * Sliding-window counter state: the counts of the last `buckets + 1` epoch-aligned buckets. Only
 * finished buckets that counted something are kept, in `history`: an array that states share and
 * only ever append to past their own `end`, so that neither counting a request nor moving to the
 * next bucket copies the window, and a quiet key's state stays small.
 */
export interface SlidingWindowState {
  algorithm: "sliding-window";
  periodMs: number;
  buckets: number;
  /** the current bucket: floor(t × buckets / periodMs) for any t inside it */
  index: number;
  /** finished buckets with units in them, oldest first, as pairs: bucket − `base`, units */
  history: number[];
  base: number;
  /** where this state's pairs start and end in `history`: all in the window, the oldest maybe in its weighted bucket */
  from: number;
  end: number;
  /** units in the finished buckets the window covers whole (all but the oldest) */
  covered: number;
  /** units counted in the current bucket */
  current: number;
}

/**
 * Token-bucket state. Tokens are kept as exact integers in units of 1/periodMs of a token,
 * so refill (limit units per periodMs) is integer arithmetic and never drifts.
 */
export interface TokenBucketState {
  algorithm: "token-bucket";
  periodMs: number;
  /** the burst the level is counted against, so a changed burst keeps what was taken; absent in a state kept by an earlier version */
  burst?: number;
  /** tokens × periodMs */
  level: number;
  /** epoch ms of the last refill */
  updatedAt: number;
}

/**
 * A token bucket with a warmup (see ./warmup), kept as the time until it is full and the key's
 * coldness then, with the policy's numbers they are counted in, so a rule changed under a live
 * key is read in the old ones.
 */
export interface WarmingBucketState {
  algorithm: "token-bucket";
  periodMs: number;
  limit: number;
  burst: number;
  warmupMs: number;
  /** time from `updatedAt` until the bucket is full, in 1/limit ms */
  debt: number;
  /** coldness when the bucket is next full, in 1/periodMs units: 0 warm (below 0 while warm and refilling), limit × warmupMs fully cold */
  cold: number;
  updatedAt: number;
}

/** Fixed-window state: the window and the units counted in it. */
export interface FixedWindowState {
  algorithm: "fixed-window";
  periodMs: number;
  /** epoch-aligned windows: the window, floor(t / periodMs); calendar ones: the epoch window of the window's last ms, for versions that know only epoch windows */
  index: number;
  /** calendar windows only: how many months to a window */
  months?: number;
  /** calendar windows only: the window, calendar months since January 1970 over `months` */
  month?: number;
  count: number;
}

/**
 * Sliding-log state: every admitted request's time and units, oldest first, as pairs (epoch ms,
 * units) in `log` from `from` to `end`. As the sliding window's history, `log` is an array states
 * share and only ever append to past their own `end`, so that admitting a request does not copy
 * the log; pairs that left the period are skipped by `from` and dropped when the log is copied.
 */
export interface SlidingLogState {
  algorithm: "sliding-log";
  periodMs: number;
  log: number[];
  from: number;
  end: number;
  /** units in the pairs from `from` to `end` */
  used: number;
  /**
   * the latest time the log was pruned at (0: never; absent in a state an earlier version wrote):
   * pairs that had left the period ending then are gone, so no later decision is made before it
   */
  seenAt?: number;
}

/**
 * GCRA state: the theoretical arrival time (TAT) as `debt`, how far it lies past `updatedAt`, in
 * units × periodMs (so TAT = updatedAt + debt / limit ms): exact integers, as the token bucket's.
 */
export interface GcraState {
  algorithm: "gcra";
  periodMs: number;
  debt: number;
  updatedAt: number;
}

/**
 * Concurrency state: the live slots, oldest first, as pairs (epoch ms taken, units) in `slots`;
 * `periodMs` is the slot TTL they were taken under. Admissions of one ms share a pair.
 */
export interface ConcurrencyState {
  algorithm: "concurrency";
  periodMs: number;
  slots: number[];
  /** units in `slots` */
  used: number;
}

export type LimiterState = SlidingWindowState | TokenBucketState | WarmingBucketState | FixedWindowState | SlidingLogState | GcraState | ConcurrencyState;

/** A decision and the state to store after it. */
export interface Outcome<S extends LimiterState = LimiterState> {
  decision: Decision;
  state: S;
}
