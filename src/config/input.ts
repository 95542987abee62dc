/** The rule format users write, as types: what `limiter`, `createGate` and `rateLimit` accept, checked again at run time by the parser, which names the field. */
import type { Aggregate, Count, Mode, OnError } from "./types";

/** A whole number then `ms`, `s`, `m`, `h` or `d`: `500ms`, `10s`, `5m`, `1h`, `1d`. `${bigint}`, not `${number}`, so that "1.5s" and "3 s", which the parser refuses, fail to compile too. */
export type DurationText = `${bigint}${"ms" | "s" | "m" | "h" | "d"}`;

/** Seconds as a number, or a {@link DurationText}. */
export type Duration = number | DurationText;

/** A fixed window's period in calendar months, from the 1st at 00:00 UTC: `"1mo"`, `"3mo"`, `"1y"`. */
export type CalendarPeriod = `${bigint}${"mo" | "y"}`;

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

/** What a rule deciding requests may read from them and answer them with besides (the middleware's, a rule set's); `limiter` is given a key and a cost, and sees no response. */
interface RequestFields {
  /** units one request takes: a positive integer (default 1), or `header:<name>` to read it from each request */
  cost?: number | `header:${string}`;
  /** what a denial is answered with in place of the 429 problem+json: `status` 400 to 599 (default 429), `body` as sent, described by `contentType` (default "text/plain; charset=utf-8") */
  denyResponse?: { status?: number; body?: string; contentType?: string };
}

/** What every algorithm of units may read from the response (all but concurrency, which counts requests in flight). */
interface ResponseFields {
  /** `header:<name>`: the response header that says what the request really cost; it is charged the difference from `cost` once the response is known */
  responseCost?: `header:${string}`;
}

/** What the windowed algorithms take besides: they give a unit back at the time it was taken, which a bucket cannot. */
interface CountedFields {
  /** which admitted requests stay counted once their response is known: "all" (default), "failed" (status 400 and up) or "successful" */
  count?: Count;
}

/** Each algorithm's own fields; `Units` is what its algorithms of units take besides. */
type Algorithms<Units> =
  | (Units & CountedFields & { algorithm?: "sliding-window"; period: Duration; buckets?: number })
  | (Units & { algorithm: "token-bucket"; period: Duration; burst?: number; warmup?: Duration })
  | (Units & CountedFields & { algorithm: "fixed-window"; period: Duration | CalendarPeriod })
  | (Units & CountedFields & { algorithm: "sliding-log"; period: Duration })
  | (Units & { algorithm: "gcra"; period: Duration; burst?: number; delay?: number })
  | { algorithm: "concurrency"; slotTtl?: Duration };

/** One rule for `limiter`: a RATE_LIMIT_RULES rule without `match`, `key` and `ipv6Prefix`, its `cost` a number (or none: `limit` is given one). */
export type LimiterRule = CommonFields & {
  /** units one request takes when `limit` names none: a positive integer (default 1) */
  cost?: number;
} & Algorithms<unknown>;

/** One rule of the Hono middleware, which decides requests: a {@link LimiterRule} that may also read its `cost` from the request and its real cost from the response (`responseCost`). */
export type RequestRule = CommonFields & RequestFields & Algorithms<ResponseFields>;

/**
 * Keys with a quota of their own (one of a rule's `overrides`): the fields given replace the rule's
 * for these keys alone; or `unlimited`, which the rule does not limit at all. `Rule` is the rule's
 * algorithm's fields: an override takes the `period`, `burst` and `delay` its rule takes, and of
 * the same types (a calendar period on a fixed window only).
 */
export type KeyOverrideInput<Rule = { period?: Duration | CalendarPeriod; burst?: number; delay?: number }> = {
  /** keys as the rule builds them, written as the admin API takes them: `"203.0.113.7"`, `"k-partner"`, `"203.0.113.7|k-partner"` for two parts */
  keys: readonly string[];
} & (
  | ({ unlimited?: undefined } & OneOrMore<{ limit?: number } & Pick<Rule, Extract<keyof Rule, "period" | "burst" | "delay">>>)
  | { /** the keys are limited by no quota of this rule: it sits out their requests */ unlimited: true }
);

/** `Fields` all optional but one or more of them, as an override that sets nothing is refused. */
type OneOrMore<Fields> = { [Field in keyof Fields]-?: Required<Pick<Fields, Field>> & Partial<Omit<Fields, Field>> }[keyof Fields];

/** Each algorithm's rule with the overrides it takes (a conditional type, so that it applies to each algorithm's rule apart). */
type WithOverrides<Rule> = Rule extends unknown ? Rule & { /** keys with a quota of their own, in place of the rule's */ overrides?: readonly KeyOverrideInput<Rule>[] } : never;

/** One rule of a rule set (`RATE_LIMIT_RULES`, `createGate`): which requests it applies to, and how their key is made. */
export type RuleInput = WithOverrides<
  RequestRule & {
    match?: { path?: string; methods?: readonly string[]; host?: string; ips?: readonly string[] };
    /** one part or several, joined (default "ip") */
    key?: KeyPart | readonly KeyPart[];
    /** the `ip` key part groups IPv6 clients by this prefix, 32 to 128 (default 56) */
    ipv6Prefix?: number;
  }
>;

/** A rule set as `RATE_LIMIT_RULES` holds it: a JSON string, `{ rules: [...] }` or a bare array. */
export type RuleSetInput = string | readonly RuleInput[] | { rules: readonly RuleInput[] };
