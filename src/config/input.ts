/** The rule format users write, as types: what `limiter`, `createGate` and `rateLimit` accept, checked again at run time by the parser, which names the field. */
import type { Aggregate, Count, Mode, OnError } from "./types";

/** Seconds as a number, or a positive integer then `ms`, `s`, `m`, `h` or `d`: `500ms`, `10s`, `5m`, `1h`, `1d`. */
export type Duration = number | `${number}${"ms" | "s" | "m" | "h" | "d"}`;

/** One part of a rule's key (README: Keys). */
export type KeyPart = "ip" | "path" | "method" | "host" | "global" | "asn" | "country" | `header:${string}` | `query:${string}` | `cookie:${string}`;

/** The fields every algorithm takes. */
interface CommonFields {
  /** `[a-z0-9_-]{1,64}`, unique in a rule set: in headers, logs, metrics and the key's Durable Object's name */
  name: string;
  /** a positive integer: what it limits depends on the algorithm */
  limit: number;
  /** "strict" (default): each decision is the key's object's; "fast": the isolate decides from leased units */
  mode?: Mode;
  /** units one request takes: a positive integer (default 1), or `header:<name>` to read it from each request */
  cost?: number | `header:${string}`;
  /** what decides when the key's object fails or is slower than `timeout` (default "local") */
  onError?: OnError;
  /** how long a decision waits for the object (default "1s") */
  timeout?: Duration;
  /** fast mode: how often an isolate reconciles with the object (default "1s") */
  sync?: Duration;
  /** fast mode: whether a key's syncs go through a relay per continent or location (default "auto") */
  aggregate?: "none" | Aggregate;
  /** caps how many keys of the rule one isolate starts tracking per second */
  newKeysPerSecond?: number;
  /** shadow mode: counts would-be denials, never denies */
  dryRun?: boolean;
  /** once the rule denies a key, deny it until this has passed */
  block?: Duration;
}

/** What every algorithm of units takes besides (all but concurrency, which counts requests in flight). */
interface UnitFields {
  /** `header:<name>`: the response header that says what the request really cost; it is charged the difference from `cost` once the response is known */
  responseCost?: `header:${string}`;
}

/** What the windowed algorithms take besides: they give a unit back at the time it was taken, which a bucket cannot. */
interface CountedFields {
  /** which admitted requests stay counted once their response is known: "all" (default), "failed" (status 400 and up) or "successful" */
  count?: Count;
}

/** One rule used from code (`limiter`, `rateLimit`): a RATE_LIMIT_RULES rule without `match`, `key` and `ipv6Prefix`. */
export type LimiterRule = CommonFields &
  (
    | (UnitFields & CountedFields & { algorithm?: "sliding-window"; period: Duration; buckets?: number })
    | (UnitFields & { algorithm: "token-bucket"; period: Duration; burst?: number; warmup?: Duration })
    | (UnitFields & CountedFields & { algorithm: "fixed-window"; period: Duration })
    | (UnitFields & CountedFields & { algorithm: "sliding-log"; period: Duration })
    | (UnitFields & { algorithm: "gcra"; period: Duration; burst?: number; delay?: number })
    | { algorithm: "concurrency"; slotTtl?: Duration }
  );

/** One rule of a rule set (`RATE_LIMIT_RULES`, `createGate`): which requests it applies to, and how their key is made. */
export type RuleInput = LimiterRule & {
  match?: { path?: string; methods?: readonly string[]; host?: string; ips?: readonly string[] };
  /** one part or several, joined (default "ip") */
  key?: KeyPart | readonly KeyPart[];
  /** the `ip` key part groups IPv6 clients by this prefix, 32 to 128 (default 56) */
  ipv6Prefix?: number;
};

/** A rule set as `RATE_LIMIT_RULES` holds it: a JSON string, `{ rules: [...] }` or a bare array. */
export type RuleSetInput = string | readonly RuleInput[] | { rules: readonly RuleInput[] };
