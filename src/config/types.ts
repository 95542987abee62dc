/** The validated configuration: rules with every default filled in, ready to match and enforce. */
import type { AlgorithmName } from "../algorithms/types";
import type { IpList } from "../routing/cidr";

/** One part of a rule's key, e.g. `header:x-api-key` → { source: "header", name: "x-api-key" }. */
export type KeyPart =
  | { source: "ip" | "path" | "method" | "host" | "global" | "asn" | "country" }
  | { source: "header" | "query" | "cookie"; name: string };

/** Units one request consumes: a constant, or read from a request header. */
export type Cost = { units: number } | { header: string };

export type Mode = "strict" | "fast";

/**
 * How a fast rule's isolates reach the key's object: through one relay per location
 * (`request.cf.colo`) or per continent (`request.cf.continent`), or (`auto`) straight to it until
 * the object reports a crowd of isolates, then through their continent's relay.
 */
export type Aggregate = "auto" | "location" | "continent";

/** What a rule decides when its Durable Object fails or is slower than `timeout`. */
export type OnError = "local" | "allow" | "deny";

/**
 * Which admitted requests a rule counts, by their response: every one, or only those whose
 * response failed (status 400 and up: failed logins, say) or succeeded (below 400). The others
 * give back what they took once the response is known.
 */
export type Count = "all" | "failed" | "successful";

export interface Rule {
  name: string;
  match: {
    /** glob; `*` matches any run of characters; "*" when the rule gave none */
    path: string;
    /** upper-case methods; null matches every method */
    methods: string[] | null;
    /** lower-case host; null matches every host */
    host: string | null;
    /** client addresses (the `ip` key part's) the rule applies to; null matches every request */
    ips: IpList | null;
  };
  key: KeyPart[];
  algorithm: AlgorithmName;
  limit: number;
  /** concurrency: its `slotTtl`, the longest a slot is held (it has no period); a fixed window with `months`: its longest window, 31 days a month */
  periodMs: number;
  /** fixed-window only, for a `period` in calendar months (`"1mo"`, `"1y"`): how many to a window, each starting on the 1st at 00:00 UTC */
  months?: number;
  burst: number;
  /** sliding-window only: buckets per period (1 for the other algorithms) */
  buckets: number;
  /** gcra only: units of the burst that pass at once; a conforming request past them is held until it conforms (absent: `burst`, nothing is held) */
  delay?: number;
  /** token-bucket only: after an idle spell the refill starts at a third of the rate and climbs to it over this long */
  warmupMs?: number;
  cost: Cost;
  mode: Mode;
  /** fast mode: how often an isolate reconciles with the Durable Object */
  syncMs: number;
  /**
   * fast mode: "location" sends the isolate's syncs through a relay object for its location
   * (`request.cf.colo`), which forwards them to the key's object in batches, "continent" through
   * one for its continent (`request.cf.continent`), "auto" (a fast rule's default) straight to the
   * key's object while few isolates share it and through the continent's relay past that (see
   * `syncsThrough`, src/fast/relay.ts); absent (`"none"`, and every strict rule): straight to it
   */
  aggregate?: Aggregate;
  /** when the Durable Object fails: decide from this isolate's counters, let through, or deny */
  onError: OnError;
  /** how long a decision waits for the Durable Object before `onError` applies */
  timeoutMs: number;
  /** the `ip` key part groups IPv6 clients by this prefix length (IPv4 and IPv4-mapped ones by the address) */
  ipv6Prefix: number;
  /** most keys of this rule one isolate starts tracking per second; null: no cap */
  newKeysPerSecond: number | null;
  /** shadow mode: the rule decides and counts as usual, but its denials only show in metrics and logs */
  dryRun: boolean;
  /** which admitted requests stay counted once their response is known */
  count: Count;
  /** the header of the origin's response that says what the request really cost (lower-cased): it is charged the difference from `cost` */
  responseCost?: { header: string };
  /** once the rule denies a key, every request for it is denied for this long; null: no block */
  blockMs: number | null;
  /** what the rule's denial is answered with in place of the 429 problem+json; absent: that 429 */
  denyResponse?: DenyResponse;
  /** keys with a quota of their own, or none, by the key as the rule builds it (see ruleForKey, ./overrides); absent: none */
  overrides?: ReadonlyMap<string, KeyOverride>;
  /** set on the rule of a key its override leaves unlimited: the rule sits out its requests, counting nothing */
  unlimited?: true;
}

/** A key's own quota in place of its rule's, or none at all. */
export type KeyOverride = KeyQuota | { unlimited: true };

/** A key's own quota: the rule's quota fields as the rule written with the override's would have them. */
export type KeyQuota = Pick<Rule, "limit" | "periodMs" | "months" | "burst" | "buckets" | "delay">;

/** A denial's own answer: its status, and its body as sent (absent: the problem+json, with this status). */
export interface DenyResponse {
  status: number;
  body?: { text: string; contentType: string };
}

export interface Config {
  rules: Rule[];
}
