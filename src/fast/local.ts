/** One key as an isolate sees it in fast mode: leased units to spend locally, and what to tell the object next. */
import { slotOf, type AlgorithmName, type Decision } from "../algorithms";
import { windowEndOf } from "../algorithms/fixed-window";
import type { Rule } from "../config/types";
import { unheardPeers, type Share } from "../limiter/local-share";
import { backoffMs } from "../strict/breaker";
import type { Lease, Report, Spent, SyncRequest } from "./lease";
import { endLots, expireLots, givesBack, leaseLeft, record, spend, type Lot } from "./lots";
import { crowded } from "./relay";
import { paceOf } from "./sync-timing";

/**
 * Who sends syncs: the isolate's id, and a sequence that only rises across all its keys. A key
 * forgotten and seen again starts afresh, and its object must still see a higher number than
 * the last it answered from this isolate, or it would take the new sync for a retry.
 */
export interface Sender {
  isolate: string;
  nextSeq(): number;
}

/** Plain per-key state, changed only by the functions below, each given the time. */
export interface LocalKey {
  lots: Lot[];
  /** units held after the last grant (from an object of an earlier version: the grant's); a sync starts early once fewer than half of them are left */
  granted: number;
  /** the object said the key is denied until then: deny locally, no call */
  blockedUntil: number;
  retryAfter: number;
  /** under a block, when requests of more than one unit pass, as the object told them (see {@link costlierUnderBlock}): cheapest first */
  costlier: Costlier[];
  /** the object's denial of a request of `cost` units, more than one, until when it holds for that cost and more (see {@link applyLease}) */
  costly: { cost: number; until: number } | null;
  /** the last global standing the object reported */
  standing: Decision | null;
  /** the algorithm the object last leased under (see Lease's `algorithm`); null before, or from an object of an earlier version */
  leasedUnder: AlgorithmName | null;
  peers: number;
  /** `aggregate: "auto"` sends this key's syncs through its continent's relay (see `crowded`, ./relay, and {@link syncFailed}) */
  relayed: boolean;
  /** units asked since `since` (admitted or not), for the object to size the next lease */
  demand: number;
  since: number;
  /** leases that ended, to report with the next sync */
  reports: Report[];
  /** a sync sent and not yet answered: retried as it is, so the object applies it once */
  outbox: SyncRequest | null;
  lastSyncAt: number;
  /** when the unanswered sync was last sent, and how long the last answered one took */
  sentAt: number;
  roundTripMs: number;
  /** the call the object booked for this isolate: the periodic sync waits for it */
  nextSyncAt: number;
  /** the object has no units to spare (see Lease's `saturated`): an emptied lease waits for `nextSyncAt` (see ./schedule) */
  saturated: boolean;
  /** units `onError` admitted while the object could not be reached, for the next sync to report */
  unleased: Spent[];
  /** units given back after the report that counted them left, for the next sync to give back (see {@link refundLocally}); negative: charged past the lease (see {@link chargeLocally}) */
  refunds: Spent[];
  /** after a failed sync, none is tried before then */
  retryAt: number;
  failures: number;
}

/** A key the isolate has not synced yet; `relayed`: its first sync goes through the relay (see `firstThroughRelay`, ./relay). */
export function freshKey(now: number, relayed = false): LocalKey {
  return {
    lots: [],
    granted: 0,
    blockedUntil: 0,
    retryAfter: 0,
    costlier: [],
    costly: null,
    standing: null,
    leasedUnder: null,
    peers: 1,
    relayed,
    demand: 0,
    since: now,
    reports: [],
    refunds: [],
    outbox: null,
    lastSyncAt: Number.NEGATIVE_INFINITY,
    sentAt: now,
    roundTripMs: 0,
    nextSyncAt: Number.NEGATIVE_INFINITY,
    saturated: false,
    unleased: [],
    retryAt: 0,
    failures: 0,
  };
}

/**
 * Decides a request from the key's lease: admitted if enough leased units are left, denied while
 * the object's denial holds, and `undefined` when only a sync can tell (no lease left, no denial).
 */
export function decideLocally(key: LocalKey, rule: Rule, cost: number, now: number): Decision | undefined {
  key.demand += cost;
  return fromLease(key, rule, cost, now);
}

/**
 * The denial of a request costing more than the rule can ever admit (`largestCost`), as the key
 * stands for this isolate: told to wait one period, as every algorithm tells it; under a block, which
 * denies every request until it ends, denied as blocked, as a strict key's object denies it. Its
 * units are not counted in `demand`, which sizes the isolate's leases.
 */
export function beyondCapacity(key: LocalKey, rule: Rule, now: number): Decision {
  expireLots(key, now);
  return standing(key, rule, false, now, "cost-exceeds-capacity", underBlock(key, now) ? key.blockedUntil : Math.max(now + rule.periodMs, key.blockedUntil), Number.POSITIVE_INFINITY);
}

/** Whether the object's block of the key holds for this isolate. */
function underBlock(key: LocalKey, now: number): boolean {
  return key.standing?.reason === "blocked" && now < key.blockedUntil;
}

/**
 * Whether the object's denial of the key holds, or the hold while a saturated key's booked call is
 * on its way (see `heldUntil`), and the lease cannot pay for `cost`: then {@link decideLocally}
 * denies it from the cache, and no other rule need ask its object either.
 */
export function deniedLocally(key: LocalKey, rule: Rule, cost: number, now: number): boolean {
  return leaseLeft(key) < cost && cachedFor(key, rule, cost, now) !== undefined;
}

/**
 * Drops the object's denial of the key, given under figures the key is now asked under more
 * generous ones than (code naming one rule with a raised limit: a plan upgraded): the next request
 * that the lease cannot pay asks the object. Its lots stay: their units were counted at the object.
 */
export function forgetDenial(key: LocalKey): void {
  key.blockedUntil = 0;
  key.costly = null;
  key.saturated = false;
}

/**
 * What {@link decideLocally} would answer a one-unit request now, spending and counting nothing:
 * an admission while the lease holds a unit, this isolate's denial while it denies the key;
 * undefined when only a sync could tell. What a peek must say.
 */
export function localPeek(key: LocalKey, rule: Rule, now: number): Decision | undefined {
  expireLots(key, now);
  if (leaseLeft(key) >= 1) return standing(key, rule, true, now, "local");
  return deniedLocally(key, rule, 1, now) ? standing(key, rule, false, now, "cache", toldUntil(key, rule, cachedUntil(key, rule, now), now)) : undefined;
}

/** {@link decideLocally} for a request whose demand is already counted: the one that waited for a sync. */
export function fromLease(key: LocalKey, rule: Rule, cost: number, now: number): Decision | undefined {
  expireLots(key, now);
  const left = leaseLeft(key);
  if (left >= cost) {
    spend(key, cost, slotOf(rule, now));
    return standing(key, rule, true, now, "local");
  }
  const until = cachedFor(key, rule, cost, now);
  return until !== undefined ? standing(key, rule, false, now, "cache", toldUntil(key, rule, until, now), cost) : undefined;
}

/**
 * The block's denial of a request of `cost` when the object cannot be asked when it passes (its
 * sync failed, or backs off): told the latest time the object gave a cost no more than it, which
 * may be early; undefined when the key is not under a block. A block is the object's word for
 * every cost: `onError` does not decide what it already denies.
 */
export function blockedAnyway(key: LocalKey, rule: Rule, cost: number, now: number): Decision | undefined {
  if (!underBlock(key, now) || leaseLeft(key) >= cost) return undefined;
  const told = key.costlier.filter((c) => c.cost <= cost).reduce((latest, c) => Math.max(latest, c.at), 0);
  return standing(key, rule, false, now, "cache", Math.max(key.blockedUntil, told), cost);
}

/** A block's denial of one cost as the object told it: when a request of `cost` passes, and when one unit does then (`oneAt`, which names the block and its figures). */
interface Costlier {
  cost: number;
  at: number;
  oneAt: number;
}

/** The costs of one block an isolate asks its object about: each is a call, so a client varying its cost header buys at most this many a block. */
const MAX_COSTLIER = 4;

/**
 * Until when the isolate's cache denies a request of `cost`, as seen at `now`: see {@link deniedUntil},
 * a request costlier than the denial was told for until its cost fits ({@link costlierThanTold}),
 * and under a block, a request of more than one unit until it passes ({@link costlierUnderBlock}).
 * Undefined when the cache does not deny it, or when only the object can tell when it passes.
 */
function cachedFor(key: LocalKey, rule: Rule, cost: number, now: number): number | undefined {
  const until = deniedUntil(key, rule, cost, now);
  if (now >= until) return undefined;
  if (cost <= 1) return until;
  if (!underBlock(key, now)) return costlierThanTold(key, rule, cost, until);
  const passes = costlierUnderBlock(key, cost);
  return passes === undefined ? undefined : Math.max(until, passes);
}

/**
 * When a request of `cost` fits, denied `until` for a cheaper one (one unit, or the costly request
 * the object last denied), as far as the isolate knows with no call (a saturated key's calls are
 * booked): no sooner than the key has that many free, as the object last said (see {@link freeAt}).
 * A cost between one unit and the costly one waits no longer than that one. Told the one-unit wait,
 * a client that drained a fast sliding window of 6 per 4 s and then sent a request of 4 came back
 * when it said and was refused again.
 */
function costlierThanTold(key: LocalKey, rule: Rule, cost: number, until: number): number {
  const costly = key.costly;
  if (costly !== null && cost === costly.cost) return until;
  const fits = Math.max(until, freeAt(key, rule, cost));
  return costly !== null && cost < costly.cost ? Math.min(fits, Math.max(until, costly.until)) : fits;
}

/**
 * When the key has `cost` units free, from the object's last standing: at once if it had them; a
 * token bucket's one refill interval a unit past its next; otherwise when the key is back to its
 * full quota, since a window's or log's units leave when only the object knows (and a fixed
 * window's at its turn), which may be late, never early.
 */
function freeAt(key: LocalKey, rule: Rule, cost: number): number {
  const standing = key.standing;
  const short = cost - (standing?.remaining ?? cost);
  if (standing === null || short <= 0) return 0;
  const bucket = rule.algorithm === "token-bucket" && (key.leasedUnder ?? rule.algorithm) === rule.algorithm;
  return bucket ? standing.moreAt + Math.ceil(((short - 1) * rule.periodMs) / rule.limit) : standing.resetAt;
}

/**
 * When a request of `cost` passes under the key's block, as the object told this isolate (a block
 * shorter than the key's own wait for a cost ends before that cost fits, and a client told the
 * block's end was denied at the limit then, and blocked again): exactly, for a cost it was told
 * of; a cheaper cost than one told, at the block's end if that one passes then, otherwise at that
 * one's time, which it waits no longer than. Undefined for a costlier one than any told, while
 * fewer than MAX_COSTLIER are known: the object is asked. Past that, the costliest's time, which may be early.
 */
function costlierUnderBlock(key: LocalKey, cost: number): number | undefined {
  const told = key.costlier.find((c) => c.cost >= cost);
  if (told) return told.at <= told.oneAt ? told.oneAt : told.at;
  return key.costlier.length < MAX_COSTLIER ? undefined : key.costlier.at(-1)!.at;
}

/**
 * What the isolate knows of a block's costlier requests once the object's answer to a sync that
 * asked for `cost` (the costliest request waiting on it) comes: that cost's time, beside what it was
 * told of the same block with the same figures.
 */
function toldCostlier(known: readonly Costlier[], standing: Decision, cost: number, now: number): Costlier[] {
  if (standing.reason !== "blocked") return [];
  const kept = known.filter((c) => c.oneAt === standing.moreAt && c.cost !== cost);
  if (cost > 1) kept.push({ cost, at: now + standing.retryAfter, oneAt: standing.moreAt });
  return kept.sort((a, b) => a.cost - b.cost).slice(-MAX_COSTLIER);
}

/** Until when the isolate denies a request of `cost` from its cache (see {@link cachedUntil}): a costly one, until the object's wait for its cost. */
function deniedUntil(key: LocalKey, rule: Rule, cost: number, now: number): number {
  const costly = key.costly !== null && cost >= key.costly.cost ? key.costly.until : 0;
  return Math.max(cachedUntil(key, rule, now), costly);
}

/**
 * Until when the isolate denies the key from its cache, as seen at `now`: the object's denial while
 * it holds, otherwise the hold while a saturated key's booked call is on its way; not after `now`
 * when neither does.
 */
function cachedUntil(key: LocalKey, rule: Rule, now: number): number {
  return now < key.blockedUntil ? key.blockedUntil : heldUntil(key, rule, now);
}

/**
 * Until when an isolate of a saturated key, its lease spent, keeps denying once its booked time has
 * come and that call is on its way (made ahead, on a timer, or by an earlier request; or failed,
 * until its backoff ends: see {@link onItsWay}): while it is answered (within the rule's timeout).
 * Its units are the isolate's share of what the key freed, for whichever request comes next; a
 * request made to wait on the call would mostly be refused at the end of it. The request that finds the booked time come with no call made makes it and waits on it,
 * as any does, since its key may have freed units long before: held instead, because the isolate
 * had been asked for more since its last sync, a client that came back at its `Retry-After` after a
 * burst seconds before was refused, and a retry 70 ms later passed. Not when the object's denial
 * outlasted the booked time: then what ends it is the key freeing units, not a booked call, and the
 * first request after that asks, as any does (a client of a short window, denied, that came back
 * once its oldest request had left it was refused again). Nor while the isolate has units to give
 * back that the object has not heard of (see {@link refundLocally}). 0 when not held.
 */
function heldUntil(key: LocalKey, rule: Rule, now: number): number {
  return key.saturated && !givesBack(key) && key.blockedUntil <= key.nextSyncAt && onItsWay(key, now) ? Math.min(key.nextSyncAt + rule.timeoutMs, turnsAt(key, rule)) : 0;
}

/**
 * Whether the key's sync is on its way: sent and not answered, or failed and waiting out its
 * backoff (see {@link syncFailed}), until which the isolate sends it again no sooner. Once the
 * backoff has ended it is not, until it is sent again: the next request sends it and waits on it.
 */
function onItsWay(key: LocalKey, now: number): boolean {
  return key.outbox !== null && (key.sentAt >= key.retryAt || now < key.retryAt);
}

/** When the sync on its way was sent, or a failed one will be sent again: at its retry time. */
function callSentAt(key: LocalKey, now: number): number {
  return key.sentAt >= key.retryAt ? key.sentAt : Math.max(now, key.retryAt);
}

/** Slack on a told answer beyond two round trips: a call's answer takes longer than the last now and then. */
const ANSWER_SLACK_MS = 50;

/**
 * When a request the cache denies until `until` is told to come back. A saturated key's denial
 * that ends at its booked call, or in the hold while that call is answered (see {@link heldUntil}),
 * ends in fact when the answer brings this isolate its share of what the key freed: two of the
 * key's last round trips after the call is sent (at the booked time, already on its way, or, for
 * one that failed, when its backoff ends), and at least one from now, plus ANSWER_SLACK_MS; no
 * later than the hold's end. Told the booked time, a client that came back then met the hold
 * and was refused again, and a retry a few ms later passed; told the hold's end, it waited up to
 * a timeout (1 s by default) for what came in one round trip.
 */
function toldUntil(key: LocalKey, rule: Rule, until: number, now: number): number {
  const booked = key.nextSyncAt;
  const holdEnds = booked + rule.timeoutMs;
  // Told by the denial's source, not its value alone: the object's ends at the booked call, the hold at its end.
  const atTheCall = now < key.blockedUntil ? until === booked : until === holdEnds;
  if (!key.saturated || !atTheCall) return until;
  const sent = key.outbox ? callSentAt(key, now) : Math.max(now, booked);
  const answered = Math.max(sent + 2 * key.roundTripMs, now + key.roundTripMs) + ANSWER_SLACK_MS;
  // Never sooner than the isolate, as it stands, stops denying.
  return Math.min(holdEnds, Math.max(now < key.blockedUntil ? until : now, answered));
}

/**
 * When a fixed window's key is back to its full quota, as the object last said: no denial of this
 * isolate's outlasts the window's turn, which frees everything at once (a saturated key's booked
 * call, up to a minute off, denied that long into a fresh window). The other algorithms free units
 * a few at a time, which the booked calls share out: their isolates deny until their turn. The
 * window is the one the object leased under, which another live version's rule may have chosen.
 */
function turnsAt(key: LocalKey, rule: Rule): number {
  return (key.leasedUnder ?? rule.algorithm) === "fixed-window" ? (key.standing?.resetAt ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
}

/**
 * A sliding-window key offers to take a lease this many sync intervals long, which the object
 * grants when it finds the key roomy; its next call is still booked one interval on. A token
 * bucket's stay one interval: how long a lease lasts bounds its burst.
 */
const ROOMY_HORIZON = 10;

/**
 * The sync to send now: the unanswered one again if there is one (same seq, so the object
 * applies it once), otherwise a new one reporting what every lease spent and what the ended ones
 * give back, and the demand gathered since. A `release` sync only settles: the key is leaving, or
 * idle, and wants no new lease.
 */
export function nextSync(key: LocalKey, rule: Rule, sender: Sender, need: number, now: number, release = false, costliest = need): SyncRequest {
  key.sentAt = now;
  if (key.outbox) return key.outbox;
  expireLots(key, now);
  const reports = key.reports;
  for (const lot of key.lots) {
    if (lot.spent.length === 0) continue;
    reports.push({ lease: lot.lease, spent: lot.spent, unspent: 0 });
    lot.spent = [];
  }
  const window = rule.algorithm === "sliding-window";
  // What the leases will still hold when the answer comes: the grant tops that up.
  const held = Math.max(0, leaseLeft(key) - paceOf(key, now) * key.roundTripMs);
  key.outbox = {
    isolate: sender.isolate,
    seq: sender.nextSeq(),
    reports,
    demand: key.demand,
    elapsedMs: Math.max(0, now - key.since),
    need,
    ...(costliest < need ? { costliest } : {}),
    horizonMs: rule.syncMs,
    held,
    ...(window ? { roomyHorizonMs: ROOMY_HORIZON * rule.syncMs } : {}),
    ...(release ? { release } : {}),
    ...(key.unleased.length > 0 ? { unleased: key.unleased } : {}),
    ...(key.refunds.length > 0 ? { refunds: key.refunds } : {}),
    sentAt: now,
  };
  key.unleased = [];
  key.refunds = [];
  key.reports = [];
  key.demand = 0;
  key.since = now;
  return key.outbox;
}

/**
 * Takes the object's answer: new leased units, its denial if any, and its view of the key. A denial
 * holds for at least one sync interval: units freed sooner go to whichever isolate syncs next, and
 * an isolate that asked again each time one unit came free would call the object per request.
 */
export function applyLease(key: LocalKey, rule: Rule, lease: Lease, now: number): void {
  const sent = key.outbox;
  if (!sent || lease.seq !== sent.seq) return;
  key.outbox = null;
  key.roundTripMs = now - key.sentAt;
  key.lastSyncAt = now;
  key.failures = 0;
  key.retryAt = 0;
  key.standing = lease.standing;
  key.leasedUnder = lease.algorithm ?? null;
  key.peers = lease.peers;
  key.relayed = crowded(key.relayed, lease.peers);
  // An object of an earlier version books nothing: then the periodic sync is one interval on.
  key.nextSyncAt = lease.nextSyncAt ?? now + rule.syncMs;
  // A rule with a block must let the object see a denied request, which is what starts the block.
  key.saturated = (lease.saturated ?? false) && rule.blockMs === null;
  // Lots granted under a looser policy than the object now leases under (a limit another Worker
  // version lowered) are given up at once. A top-up (see Lease's `topsUp`) renews the others to end
  // with it, but not one that has already ended: its object may have counted it spent and stopped
  // pinning it. From an object of an earlier version, which grants on top of them, a lease
  // outlasting its booked call (a roomy key) replaces them, or an isolate calling every interval
  // while it spends would hold ten at once.
  if (lease.revoke || (!lease.topsUp && lease.units > 0 && lease.expiresAt - key.nextSyncAt > rule.syncMs)) endLots(key);
  if (lease.topsUp) {
    for (const lot of key.lots) if (lot.expiresAt > now) lot.expiresAt = Math.max(lot.expiresAt, lease.expiresAt);
    expireLots(key, now);
  }
  // What onError admitted after this sync left, and still counts, is not in the object's grant:
  // spent on top of it, an outage's admissions were leased out a second time when the object came
  // back (the first answer then is the retried sync of before the outage). Nor is what charges
  // took past the lease meanwhile (owed: negative refunds): spent on top of it, a key charged to
  // its limit while its sync was on its way admitted that sync's grant too. As many units of the
  // grant go back at once, unspent, with the next sync, which reports those admissions and charges.
  const owed = key.refunds.map((s) => ({ at: s.at, units: Math.max(0, -s.units) }));
  const withheld = Math.min(lease.units, stillCounting([...key.unleased, ...owed], rule, now));
  if (withheld > 0) key.reports.push({ lease: lease.seq, spent: [], unspent: withheld });
  if (lease.units > withheld) key.lots.push({ lease: lease.seq, units: lease.units - withheld, expiresAt: lease.expiresAt, spent: [] });
  // A blocked key stops spending what it still holds: the block applies to every isolate from its next sync.
  if (lease.standing.reason === "blocked") surrender(key);
  key.granted = lease.topsUp ? leaseLeft(key) : lease.units;
  key.retryAfter = lease.standing.allowed ? 0 : lease.standing.retryAfter;
  // Only an empty grant with the key denied is a denial: units leased, or an empty background
  // grant while the key has room, leave the isolate free to ask again. A rule with a block caches
  // only the block: the object must see a denied request to start it, and a background sync asks
  // for nothing it could deny.
  const denies = lease.units === 0 && !lease.standing.allowed && (rule.blockMs === null || lease.standing.reason === "blocked");
  // A denial told for a request of more than one unit (the costliest of those the sync asked for, as
  // the object denies them) holds for one unit until the key frees one, and for that cost and more
  // until its own wait: held for every request, one costly request at a drained bucket of 10 per
  // 10 s had its isolate refuse one-unit requests for the 10 s, with two tokens come after 2.5.
  // Under a block, as many costs as the isolate asked about are remembered (see `costlierUnderBlock`).
  const deniedFor = Math.min(sent.costliest ?? sent.need, sent.need);
  const costly = deniedFor > 1 && lease.standing.reason !== "blocked";
  const oneUnit = deniedFor > 1 ? Math.min(key.retryAfter, Math.max(0, lease.standing.moreAt - now)) : key.retryAfter;
  const denied = denies ? now + Math.max(oneUnit, rule.syncMs) : 0;
  // No denial outlasts a fixed window's turn (see `turnsAt`), a costly one's neither.
  key.costly = denies && costly ? { cost: deniedFor, until: Math.min(now + Math.max(key.retryAfter, rule.syncMs), turnsAt(key, rule)) } : null;
  key.costlier = toldCostlier(key.costlier, lease.standing, deniedFor, now);
  // A saturated key's units go out in the calls the object booked: one asked for sooner would only
  // take them from an isolate whose turn it is (and see `heldUntil` for the booked call itself).
  // Nor is a unit to be had before the key frees one, when the grant took the last.
  const frees = lease.standing.remaining < 1 ? lease.standing.moreAt : 0;
  key.blockedUntil = Math.min(key.saturated ? Math.max(denied, key.nextSyncAt, frees) : denied, turnsAt(key, rule));
  // Units given back after this sync left (see refundLocally) are not in its answer: the next request asks again.
  if (givesBack(key) && lease.standing.reason !== "blocked") [key.blockedUntil, key.costly] = [0, null];
}

/**
 * Units of `spent` that still count in full against the key at `now` (see {@link countsUntil});
 * older ones the object counts for nothing, or (a sliding window's bucket leaving it) in part.
 */
function stillCounting(spent: readonly Spent[], rule: Rule, now: number): number {
  return spent.reduce((sum, s) => sum + (now < countsUntil(rule, s.at) ? s.units : 0), 0);
}

/**
 * Until when units filed under `slot` count in full against the key: while their window lasts (a
 * fixed window's: a calendar month's is not a period long), for a period (a sliding window's or
 * log's), or for a bucket's refill from empty.
 */
function countsUntil(rule: Rule, slot: number): number {
  if (rule.algorithm === "fixed-window") return windowEndOf(rule, slot);
  return slot + (rule.algorithm === "token-bucket" ? Math.ceil((rule.periodMs * rule.burst) / rule.limit) : rule.periodMs);
}

/**
 * What this isolate knows of how the key is shared, for its rule's `onError` "local" share: the
 * object's last count of isolates and of free units, and when it said so; for a key whose object has
 * never answered, `ruleMost` isolates (the most any object of the rule has reported to this isolate)
 * and nothing known taken; when no object of the rule has answered, see {@link unheardPeers}.
 */
export function knownShare(key: LocalKey, ruleMost: number, coldForMs: number): Share {
  if (key.lastSyncAt === Number.NEGATIVE_INFINITY) {
    return { peers: unheardPeers(ruleMost, coldForMs), free: Number.POSITIVE_INFINITY, heardAt: key.lastSyncAt };
  }
  return { peers: key.peers, free: key.standing?.remaining ?? Number.POSITIVE_INFINITY, heardAt: key.lastSyncAt };
}

/** Notes units the rule's `onError` admitted while the object could not be reached: the next sync has them counted. */
export function admittedUnleased(key: LocalKey, rule: Rule, units: number, now: number): void {
  record(key.unleased, slotOf(rule, now), units);
}

/**
 * Gives back units the rule's `onError` admitted at `admittedAt` (see {@link admittedUnleased}) for a
 * request another rule then denied: taken off what the next sync reports, or, when a sync already
 * carried them to the object, given back to it as a charge is (see {@link unchargeLocally}). Left
 * there, the object counted a request that never reached the origin once it was back.
 */
export function unadmitUnleased(key: LocalKey, rule: Rule, units: number, admittedAt: number, now: number): void {
  const noted = key.unleased.find((s) => s.at === slotOf(rule, Math.min(admittedAt, now)));
  const off = Math.min(units, noted?.units ?? 0);
  if (off > 0) {
    noted!.units -= off;
    key.unleased = key.unleased.filter((s) => s.units > 0);
  }
  if (units > off) unchargeLocally(key, rule, units - off, admittedAt, now);
}

/**
 * A sync failed, or a request stopped waiting for it at the rule's timeout (a slow object is a
 * failing one): keep everything it carried for the retry, back off, and under `aggregate: "auto"`
 * retry through the relay. Once only while the key backs off: requests that gave up on one sync
 * together, and that sync failing after they did, are one failure. Says whether it counted.
 */
export function syncFailed(key: LocalKey, rule: Rule, now: number): boolean {
  if (now < key.retryAt) return false;
  key.failures++;
  key.retryAt = now + backoffMs(rule.syncMs, key.failures);
  // An object that did not answer may be crowded beyond what its answers said, as at a cold start
  // where every isolate meets the key at once: at the simulation's, 4,096 isolates at 10× making
  // their first syncs straight, retries through the continents' relays cut onError's answers by a
  // fifth and its admissions by four fifths.
  if (rule.aggregate === "auto") key.relayed = true;
  return true;
}

/**
 * Gives back units a request spent from the lease when another rule denied it (or `settle` found it
 * uncounted): into the newest live lease, reported as a negative spend, while they still count in
 * full where they were spent. Otherwise (the request spent the last unit of the lease that paid,
 * which then ended and was reported spent; or their slot has since left the window, wholly or in
 * part) the next sync gives the units back on their own (`refunds`), as a strict refund does, and
 * until it has, the object's last word (which counted them) denies nothing: the next request asks
 * again. A block stands. The units are given back in the slot they were spent in (`spentAt`): given
 * back in a later bucket, they would stay counted in theirs, which leaves the window first, and the
 * key would admit one more. Put in the lease, a unit of a window that was over came back as a whole
 * unit of the new one: a fixed window of 1 admitted 2 once a request of the window before settled.
 */
export function refundLocally(key: LocalKey, rule: Rule, units: number, spentAt: number, now: number): void {
  expireLots(key, now);
  const slot = slotOf(rule, Math.min(spentAt, now));
  const newest = key.lots.at(-1);
  const until = countsUntil(rule, slot);
  if (newest && now < until) {
    newest.units += units;
    record(newest.spent, slot, -units);
    (newest.back ??= []).push({ at: slot, units, until });
    return;
  }
  record(key.refunds, slot, units);
  endDenialForGiveBack(key, now);
}

/**
 * Takes `units` more for a request the key admitted (see `charge` on LimitResult), at `now`: spent
 * from the lease as a request would spend them, but for the `reserved` units requests waiting on a
 * sync were granted (spent by a burst's charges, those requests were refused at 80 % of the limit),
 * and the rest owed to the object, which the key's next sync tells as a refund taken back
 * (`refunds`, negative): never denied, so the key may owe past its limit, and the object leases
 * nothing until the debt is paid. They are not demand: one charge of 300 on a key of one request
 * had its isolate hold two thirds of what was free.
 */
export function chargeLocally(key: LocalKey, rule: Rule, units: number, now: number, reserved = 0): void {
  expireLots(key, now);
  const slot = slotOf(rule, now);
  const paid = Math.max(0, Math.min(units, leaseLeft(key) - reserved));
  if (paid > 0) spend(key, paid, slot);
  if (units > paid) record(key.refunds, slot, paid - units);
}

/**
 * Gives back units a charge took (see {@link chargeLocally}) in the slot they were charged in: to the
 * object, with the next sync, never into the lease, since what a charge owed was never leased (given
 * back into a lot, it let the isolate admit past its lease); what is still owed nets against it.
 */
export function unchargeLocally(key: LocalKey, rule: Rule, units: number, chargedAt: number, now: number): void {
  record(key.refunds, slotOf(rule, Math.min(chargedAt, now)), units);
  endDenialForGiveBack(key, now);
}

/** Units go back that the object's last word counted: its denial of the key says nothing now (the next request asks), but a block, which stands. */
function endDenialForGiveBack(key: LocalKey, now: number): void {
  if (key.standing?.reason === "blocked") return;
  key.blockedUntil = Math.min(key.blockedUntil, now);
  key.costly = null;
}

/** Ends every lease, reporting what each spent and giving back the rest, as when the key leaves the table. */
export function surrender(key: LocalKey): void {
  endLots(key);
  key.demand = 0;
}

/** Whether the key still holds something the object should hear about. */
export function hasPending(key: LocalKey): boolean {
  return key.outbox !== null || key.reports.length > 0 || key.lots.length > 0 || key.demand > 0 || key.unleased.length > 0 || key.refunds.length > 0;
}

/**
 * The object's last word as it stands at `now`. A fixed window's count is gone once its window has
 * ended: until the next sync says how the new window stands, the key is as this isolate has used it
 * there (what it spent and holds; its peers' use it learns then), back to full at the window's end.
 */
function lastWord(key: LocalKey, rule: Rule, now: number): Decision | null {
  const global = key.standing;
  if (global === null || rule.algorithm !== "fixed-window") return global;
  const window = slotOf(rule, now);
  // A denial the isolate still holds (a block) outlasts the window.
  if (slotOf(rule, key.lastSyncAt) >= window || (!global.allowed && now < key.blockedUntil)) return global;
  const inWindow = (spent: readonly Spent[]) => spent.reduce((sum, s) => sum + (s.at === window ? s.units : 0), 0);
  const used = key.lots.reduce((sum, lot) => sum + inWindow(lot.spent), 0) + key.reports.reduce((sum, r) => sum + inWindow(r.spent), 0);
  const held = leaseLeft(key);
  const full = used === 0 ? now : windowEndOf(rule, window);
  return { allowed: true, limit: rule.limit, remaining: Math.max(0, rule.limit - used - held), resetAt: full, moreAt: full, retryAfter: 0 };
}

/** A decision in the shared shape, from the lease left and the object's last word; a denial holds until `until`. */
function standing(key: LocalKey, rule: Rule, allowed: boolean, now: number, reason: "local" | "cache" | "cost-exceeds-capacity", until = now, cost = 1): Decision {
  const global = lastWord(key, rule, now);
  const left = leaseLeft(key) + (global?.allowed ? global.remaining : 0);
  const decision: Decision = {
    allowed,
    limit: rule.limit,
    // A denial leaves fewer units than asked for: the object may have units free that this isolate
    // cannot lend now (its booked call not yet come), and a 429 that said `r=9` had its client
    // retry at once, for nothing.
    remaining: allowed ? left : Math.min(left, cost - 1),
    resetAt: Math.max(global?.resetAt ?? now, now),
    // What the object last said; once that has passed, this isolate cannot tell and says "now".
    moreAt: Math.max(global?.moreAt ?? now, now),
    retryAfter: allowed ? 0 : Math.max(1, until - now),
    // A denial while the object's block holds says so, as the object's own would.
    reason: reason !== "local" && underBlock(key, now) ? "blocked" : reason,
  };
  return decision;
}
