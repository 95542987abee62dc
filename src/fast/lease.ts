/** How a key's Durable Object shares its headroom among isolates: demand-sized leases, reserved when granted, counted when reported. */
import { adjust, decide, mostCharged, mostOwed, peek, sameSlots, slotEnd, slotOf, takenAtATime } from "../algorithms";
import type { AlgorithmName, Decision, LimiterState, Policy } from "../algorithms";
import { blockedDecision, blockStart } from "../algorithms/block";
import { pinnedUnits, pinSpentAt, REPORT_GRACE_MS, stricter, type Peer, type Pin } from "./peer";
import { demand, putPeer, settlePins, type PeerIndex } from "./peer-index";
import { bookSync, isSaturated, sustainedRate } from "./schedule";

/** Units an isolate spent at `at` (a slot, see `slotOf`), or gave back when negative. */
export interface Spent {
  at: number;
  units: number;
}

/** What an isolate did with one lease since it last said: what it spent, and what it gives back. */
export interface Report {
  /** the lease's `seq` */
  lease: number;
  spent: Spent[];
  /** units it will never spend: the rest of a lease that ended or was given up */
  unspent: number;
}

/** One reconciliation from one isolate. (isolate, seq) identifies it: a retry is answered, not applied again. */
export interface SyncRequest {
  isolate: string;
  seq: number;
  reports: Report[];
  /** units asked of this isolate for the key (admitted or not) since its last sync, over elapsedMs */
  demand: number;
  elapsedMs: number;
  /** units the requests waiting on this key need now, together; 0 when none waits */
  need: number;
  /**
   * the units of the costliest of them, when they are more than one request: those the grant cannot
   * cover are told when a request of that cost would pass, not all of them together (a crowd of 30
   * at a token bucket of 10 a minute was told a period); absent for one request, and from an isolate
   * of an earlier version: then the denial is for `need`
   */
  costliest?: number;
  /** how long the lease should last: one sync interval, or several for a key the isolate saw far from its limit */
  horizonMs: number;
  /**
   * a longer lease the isolate will take if the object finds the key roomy after the grant (see
   * {@link isRoomy}): a new key far from its limit then costs one call, not a short lease and a long one
   */
  roomyHorizonMs?: number;
  /** the isolate is letting the key go (evicted): settle what it carries, lease nothing */
  release?: boolean;
  /**
   * units the isolate's live leases will still hold when the answer comes, as it reckons (what they
   * hold less its demand over its last round trip): the grant tops them up (see Lease's `topsUp`)
   * rather than coming on top of them. Not rounded: the object rounds the grant once, up. An
   * isolate of an earlier version sends it rounded down, or none.
   */
  held?: number;
  /**
   * units the isolate admitted with no lease, by its rule's `onError`, while the object could not be
   * reached: counted when the object hears of them, in the slots they were admitted in
   */
  unleased?: Spent[];
  /**
   * units a report the object already applied counted as spent, given back since (another rule
   * denied their request): uncounted in their slots, as a strict refund is
   */
  refunds?: Spent[];
  /**
   * the isolate's clock when it made the sync: the object reads the times a token bucket's units
   * were spent at by how long before it they were, not by the isolate's clock (see {@link filedAt});
   * absent from an isolate of an earlier version, which dates none
   */
  sentAt?: number;
}

/** Units the isolate may admit on its own until `expiresAt`; `seq` names the lease in its reports. */
export interface Lease {
  seq: number;
  units: number;
  expiresAt: number;
  /** the key's global standing after the grant; when `units` < need, a denial with its retryAfter */
  standing: Decision;
  /** isolates that synced recently, this one included */
  peers: number;
  /**
   * the algorithm of the policy the lease was granted under, which may be another live version's
   * (see `leasePolicy`, ./peer-index): how the key frees units; absent from an object of an earlier version
   */
  algorithm?: AlgorithmName;
  /** when the isolate should call next: the object books every isolate's calls from one budget per key (see ./schedule) */
  nextSyncAt: number;
  /**
   * the key has no units to spare (asked for well past its limit, or this grant was cut short by
   * what is free): once this lease is spent, the isolate waits for `nextSyncAt` rather than calling sooner
   */
  saturated: boolean;
  /**
   * the isolate's earlier leases were granted under a less restrictive policy than this one (a limit
   * lowered by another Worker version): it gives them up at once, reporting what they spent
   */
  revoke?: true;
  /**
   * the grant counted the isolate's `held` units: it keeps its earlier leases and spends them
   * first. Without it (an object of an earlier version), a lease outlasting its booked call
   * replaces the ones before it, or an isolate calling every interval would hold several at once.
   */
  topsUp?: true;
}

/**
 * A key is roomy when, after a grant, at least this many times what every isolate holds is still
 * free: no isolate's lease can then crowd out another's before it ends.
 */
const ROOMY = 8;

/** The most a key far from its limit spares an isolate beyond its demand, as a multiple of that demand or its need. */
const SLACK_PER_DEMAND = 8;

/**
 * How long past its booked call a quiet isolate's lease lasts: this many of its mean gaps between
 * requests (its next request comes later than that one time in a thousand, for Poisson arrivals),
 * but no later than this many intervals after the grant, how long a lease outlives a reset
 * (the product contract); or, for a call booked further off than that (thousands of isolates), this many past it.
 */
export const QUIET_GAPS = 7;
export const QUIET_UNTIL_INTERVALS = 10;
const QUIET_PAST_BOOKED_INTERVALS = 4;

/**
 * The fewest units an isolate's demand rate is measured over, where its earlier syncs counted that
 * many: a quiet isolate's sync counts a few requests, too few to size a lease by (2.5 requests
 * read ±63 %; 20, ±22 %). At 512 isolates and 1× load this cut the simulation's waits by a third
 * and its under-admission by 0.4 points (bench/SIMULATION.md); 40 did about as well.
 */
export const RATE_BASIS = 20;

/**
 * An isolate's demand rate, units a ms, from its sync and the rate the object last measured for it
 * (`known`), and how many units that rate is measured over. The sync's own count is read over an
 * interval at least: a sync soon after the last (a request its lease could not pay for) carries the
 * previous rate for the rest of it, so one request after a short while is not read as a high rate.
 * A count of fewer than {@link RATE_BASIS} units carries the previous rate for as many units more as
 * it was measured over, up to RATE_BASIS in all; but a count the previous rate could not plausibly
 * have produced (more than three standard deviations of a Poisson count off, and one unit) starts
 * afresh, so a flash crowd is followed at once. A new isolate's first sync, which follows its first
 * request at once, spreads it over an interval: a guess, measured over nothing.
 */
export function demandRate(known: Pick<Peer, "rate" | "basis"> | undefined, sync: SyncRequest): { rate: number; basis: number } {
  if (!known) return { rate: sync.demand / Math.max(sync.elapsedMs, sync.horizonMs), basis: 0 };
  const prior = known.rate;
  if (prior <= 0) return { rate: sync.demand / Math.max(1, sync.elapsedMs), basis: sync.demand };
  const mean = prior * sync.elapsedMs;
  const plausible = Math.abs(sync.demand - mean) <= 3 * Math.sqrt(mean) + 1;
  const carried = plausible ? Math.max(0, Math.min(known.basis ?? 0, RATE_BASIS - sync.demand)) / prior : 0;
  const span = Math.max(0, sync.horizonMs - sync.elapsedMs, carried);
  const counted = sync.demand + prior * span;
  return { rate: counted / Math.max(1, sync.elapsedMs + span), basis: Math.min(RATE_BASIS, counted) };
}

/**
 * What one call of an isolate with `share` of a key's demand may take, at most: its share of what is
 * free now, or of what the key frees until its next call `untilCall` ms on if that is more (a key at
 * its limit, whose units come free a few at a time: the isolates call in turn, each once a booked
 * interval). The second comes with room for demand that comes in bursts: two standard deviations of
 * a Poisson count of that mean, so the lease runs dry before the call about one time in forty
 * rather than one in two, and the request after it waits on the call; but no more than the share
 * of what the key frees while the call is answered (`answerMs`), as far as a lease must reach. Each
 * isolate's room comes out of the others' turns and sits unspent in its lease, so it is kept to the
 * spread: a quiet isolate's (a few units a call) is the answer's share alone.
 */
export function fairShare(policy: Policy, share: number, available: number, untilCall: number, answerMs: number): number {
  const rate = share * sustainedRate(policy);
  const flow = rate * untilCall;
  return Math.max(share * available, flow + Math.min(2 * Math.sqrt(flow), rate * answerMs));
}

/** Whether `free` units left after granting `granted` to each of `peers` isolates make the key roomy. */
export function isRoomy(free: number, granted: number, peers: number): boolean {
  return free >= ROOMY * granted * peers;
}

/**
 * Applies one sync. The isolate's reports come first: what it spent is counted in the buckets it
 * was spent in, what a finished lease did not spend is freed, and what its `onError` admitted
 * without a lease is counted too. Then the object books the isolate's next call (see ./schedule)
 * and grants it what it needs now (what is left, if that is less: its waiting requests are served
 * as far as that goes) plus enough for its recent demand until that call is answered, but never
 * more than its demand-weighted share of what is left. Granted units are not counted yet but
 * pinned: every decision treats them as taken, now, until they are reported, so whatever the
 * isolates do with their leases the object never admits more than the limit, and a lease can
 * outlast the bucket it was granted in. `policy` is what the lease is granted under (see
 * `leasePolicy`, ./peer-index), `askedPolicy` what the isolate asked under; an isolate whose unreported leases were
 * granted under a less restrictive policy than `policy` is told to give them up. It updates `peers`
 * in place and names in `changed` the peers whose rows it rewrote (none for a retry).
 */
export function grantLease(
  policy: Policy,
  stored: LimiterState | undefined,
  peers: PeerIndex,
  sync: SyncRequest,
  now: number,
  blockedUntil = 0,
  cursor = Number.NEGATIVE_INFINITY,
  askedPolicy = policy,
): { state: LimiterState | undefined; peers: PeerIndex; lease: Lease; blockedUntil: number; cursor: number; changed: string[] } {
  const known = peers.peers.get(sync.isolate);
  if (known && known.lease.seq >= sync.seq) return { state: stored, peers, lease: known.lease, blockedUntil, cursor, changed: [] };
  const settled = settlePins(policy, stored, peers, now);
  let state = settled.state;
  let pins: Pin[] = peers.peers.get(sync.isolate)?.pins ?? [];
  // Every other peer's pins: whole units, so taking the caller's from the total is exact.
  const othersPinned = peers.pinned - pinnedUnits(pins);
  const counted: Spent[][] = [];
  for (const report of sync.reports) {
    const pin = pins.find((p) => p.lease === report.lease);
    // A lease already settled (counted in full) or never granted: its report would count twice.
    if (!pin) continue;
    counted.push(report.spent);
    const settledUnits = report.spent.reduce((sum, s) => sum + s.units, report.unspent);
    // Whatever the isolate has not accounted for stays pinned until REPORT_GRACE_MS settles it.
    const rest = pin.units - settledUnits;
    pins = pins.flatMap((p) => (p !== pin ? [p] : rest > 0 ? [{ ...p, units: rest }] : []));
  }
  const refunds = sync.refunds ?? [];
  counted.push(refunds.filter((s) => s.units > 0).map((s) => ({ at: s.at, units: -s.units })));
  // A negative refund is a charge the isolate's lease could not pay (see `chargeLocally`).
  const charged = refunds.filter((s) => s.units < 0).map((s) => ({ at: s.at, units: -s.units }));
  // A window owes nothing past its period: only a bucket's own allowance is kept for it.
  const owed = Math.max(mostOwed(policy), takenAtATime(askedPolicy) ? mostOwed(askedPolicy) : 0);
  state = countSpent(policy, state, counted.flat(), sync.unleased ?? [], owed, filedAt(askedPolicy, policy, now, sync.sentAt), now, charged);
  const under = known?.under;
  // Its pins stay until it reports them, so what it gives up now is counted as taken until then.
  const revoke = pins.length > 0 && under !== undefined && stricter(policy, under);
  const pinned = pinnedUnits(pins) + othersPinned;
  const { rate, basis } = demandRate(known, sync);
  // A peer is active while it syncs, and until the call the object booked for it is overdue.
  const { active, totalRate } = demand(peers, sync.isolate, rate, sync.horizonMs, now);
  const available = peek(policy, withPinned(policy, state, pinned, now), now).remaining;
  const saturated = isSaturated(policy, totalRate, available, sync.horizonMs);
  const booking = bookSync(policy, cursor, active, totalRate, saturated, sync.horizonMs, now);
  const share = totalRate > 0 ? rate / totalRate : 1 / active;
  const untilCall = booking.nextSyncAt - now;
  // The lease must last until the booked call is answered: half an interval is left for the answer.
  const answerMs = sync.horizonMs / 2;
  // What the isolate will still hold is its own to share as much as what is free: an isolate alone
  // at a saturated key, holding more than was left free, was topped up with nothing and then waited
  // out its booked call (a minute) with the free units unclaimed.
  const held = Math.max(0, sync.held ?? 0);
  const most = fairShare(policy, share, available + held, untilCall, answerMs);
  // The spread covers demand that comes in bursts.
  const expected = rate * (untilCall + answerMs);
  const forDemand = Math.ceil(expected + Math.sqrt(expected));
  // A key far from its limit can spare more than the recent demand: a sixteenth of an even share
  // spares a quiet or cold isolate a call per request, and is nothing to a key near its limit. It
  // is at most a few times that demand (or need): at a cold start the first isolates see few others,
  // and a sixteenth of the whole limit each would sit pinned, unspent, while the rest arrive.
  const slack = Math.min(Math.floor(available / (16 * active)), SLACK_PER_DEMAND * Math.max(forDemand, sync.need));
  // What the isolate will still hold is part of what it is given: the grant tops it up, rounded up
  // once. Rounding the share up and what is held down as well left each isolate up to a unit more
  // than it asked for: at 512 isolates and 1×, 0.3–0.4 points of the simulation's under-admission.
  const wanted = Math.max(sync.need, Math.ceil(Math.min(most, Math.max(forDemand, slack)) - held));
  const blocked = now < blockedUntil;
  const granted = sync.release || blocked ? 0 : Math.min(available, wanted);
  const view = withPinned(policy, state, pinned + granted, now);
  const short = granted < sync.need;
  const deniedFor = Math.min(sync.costliest ?? sync.need, sync.need);
  const asked = short ? decide(policy, view, deniedFor, now).decision : peek(policy, view, now);
  // A denial of the waiting requests together (not the standing after a grant) starts the rule's
  // block, if it has one: then nothing is leased. They are paid by the units their isolate still
  // holds as much as by the grant: judged with those counted as taken, a request of 3 at an isolate
  // holding 2, with 2 more free, was denied and blocked, where one unit of the grant was enough.
  const together = short && policy.blockMs !== undefined ? decide(policy, withPinned(policy, state, othersPinned, now), sync.need, now).decision : undefined;
  const block = blocked ? blockedUntil : together ? blockStart(policy, together, now) : undefined;
  const units = block === undefined ? granted : 0;
  const toldAs = (until?: number) => soonerUnderOthers(asFiled(asked, askedPolicy, policy, now, until), stricter(policy, askedPolicy), now, sync.horizonMs);
  // Under a block, told when the costliest request waiting passes (`moreAt`: one unit), which may
  // be after the block ends: what other isolates hold counts as taken, as it does until they report
  // it; not what this one holds, which it gives back on hearing of the block.
  const standing = block === undefined ? toldAs() : blockedDecision(policy, withPinned(policy, state, othersPinned, now), block, now, deniedFor);
  const roomy = sync.roomyHorizonMs !== undefined && units > 0 && standing.allowed && isRoomy(standing.remaining, units, active);
  // The lease lasts until the booked call has had half an interval to be answered. An isolate makes
  // that call with its first request after the booked time: a quiet one's lease lasts until that
  // request has almost surely come (seven of its mean gaps, up to ten intervals from now), or it would end
  // unused and the request would wait on a call. Not for a rule with a block: an isolate that never
  // saw the denial must hear of the block within an interval, not admit its next request first.
  const quietCap = Math.max(QUIET_PAST_BOOKED_INTERVALS * sync.horizonMs, now + QUIET_UNTIL_INTERVALS * sync.horizonMs - booking.nextSyncAt);
  const quiet = saturated || rate <= 0 || policy.blockMs !== undefined ? 0 : Math.min(QUIET_GAPS / rate, quietCap);
  const lasts = Math.max(now + (roomy ? sync.roomyHorizonMs! : 0), booking.nextSyncAt + Math.max(answerMs, quiet));
  // A grant short of what the requests waiting on it need is theirs, spent as it arrives: it lasts
  // as long as the shortest lease (an interval, and half of one for the answer), not until a
  // saturated key's booked call a quarter period off. Its pin's end is where its units are counted
  // if never reported, and a denial is told as if they will be (see `asFiled`): a crowd that joined a
  // sync in flight at a fast sliding window of 10 a minute was told 76 s, though 61 s passed. Not
  // when the isolate holds units: a top-up renews them to its own end, and so capped they ran out
  // before the isolate, denying from its cache, reported them, and were counted spent.
  const expiresAt = short && held === 0 ? Math.min(lasts, now + sync.horizonMs + answerMs) : lasts;
  // A top-up renews what the isolate holds: its earlier leases end with this one, as it ends them too.
  const topsUp = sync.held !== undefined;
  if (topsUp && !sync.release) pins = pins.map((p) => (p.until < expiresAt ? { ...p, until: expiresAt } : p));
  if (units > 0) pins = [...pins, { lease: sync.seq, units, until: expiresAt }];
  // Told as the object will count this isolate's pins if they are still unreported when the client comes back.
  const told = block === undefined && pins.length > 0 ? toldAs(Math.max(...pins.map((p) => p.until))) : standing;
  // A grant cut short by what is free leaves the key nothing to spare until it frees more: units
  // freed before this isolate's booked call belong to the isolates whose calls come first, and
  // asking for them sooner would only make its next request wait on a call to be refused.
  const exhausted = !sync.release && units < wanted;
  const lease: Lease = { seq: sync.seq, units, expiresAt, standing: told, peers: active, algorithm: policy.algorithm, nextSyncAt: booking.nextSyncAt, saturated: saturated || exhausted, ...(revoke ? { revoke } : {}), ...(topsUp ? { topsUp } : {}) };
  putPeer(peers, sync.isolate, { rate, basis, seenAt: now, lease, pins, asked: askedPolicy, under: policy }, now);
  const changed = [...settled.before.keys()].filter((id) => id !== sync.isolate).concat(sync.isolate);
  return { state, peers, lease, blockedUntil: block ?? blockedUntil, cursor: booking.cursor, changed };
}

/**
 * Counts what an isolate reported, `spent` from leases (negative: given back), `unleased`
 * admitted by `onError` and `charged` past its lease, each entry where `place` puts it (undefined:
 * not at all); the unleased leave a token bucket or GCRA owing at most `owedAtMost` units (see
 * `mostOwed`), the charged at most `mostCharged`. Units taken at a
 * time (see `takenAtATime`) are taken in the order they went, since each take keeps the state as
 * of its time, and an earlier one taken after it would count as late as it; the units given back
 * come last, as they are given back now.
 */
export function countSpent(
  policy: Policy,
  state: LimiterState | undefined,
  spent: readonly Spent[],
  unleased: readonly Spent[],
  owedAtMost: number,
  place: (spent: Spent) => number | undefined,
  now: number,
  charged: readonly Spent[] = [],
): LimiterState | undefined {
  const placed: { at: number; units: number; owed: number }[] = [];
  const add = (s: Spent, owed: number) => {
    const at = place(s);
    if (at !== undefined) placed.push({ at, units: s.units, owed });
  };
  for (const s of spent) add(s, Number.POSITIVE_INFINITY);
  for (const s of unleased) add(s, owedAtMost);
  for (const s of charged) add(s, mostCharged(policy));
  if (takenAtATime(policy)) placed.sort((a, b) => Number(a.units < 0) - Number(b.units < 0) || a.at - b.at);
  return placed.reduce<LimiterState | undefined>((from, s) => adjust(policy, from, s.units, s.at, now, s.owed), state);
}

/**
 * Where units an isolate filed under `asked`'s slots (see `slotOf`) are counted under `policy`: at
 * their slot when the two file alike; otherwise at the latest time they may have been taken, and
 * no later than now, so that none leaves `policy`'s window sooner than it would have (GCRA files
 * every unit under 0, which a window dropped as long gone, and the next lease handed the units out
 * again). Units given back (negative) under other slots cannot be placed where they were counted:
 * undefined, and they stay counted. A token bucket (or GCRA) takes units at a time, not in a slot,
 * and gives any back now: at that latest time (now for a slot of no time). Both latest times are
 * moved onto the object's clock by the sync's `sentAt`. Read on the isolate's own clock, an isolate
 * a second behind had a burst it spent just before its sync credited a second's refill it never
 * had (2.5 tokens of a bucket of 10 per 4 s), and a token bucket's units spent at the start of a
 * fixed window counted in the window before; read as how long before the sync they were, they can
 * only be later than they were. Units filed alike stay in their slot, on the isolate's clock.
 */
export function filedAt(asked: Policy, policy: Policy, now: number, sentAt?: number): (spent: Spent) => number | undefined {
  const toObject = sentAt === undefined ? 0 : now - sentAt;
  if (takenAtATime(policy)) return (spent) => Math.min(now, slotEnd(asked, spent.at) + toObject);
  if (sameSlots(asked, policy)) return (spent) => spent.at;
  return (spent) => (spent.units < 0 ? undefined : Math.min(now, slotEnd(asked, spent.at) + toObject));
}

/**
 * A standing as the isolate will find it once it reports what it spends now: a token bucket (or
 * GCRA) takes those units at the end of their tick (see `slotOf`, {@link filedAt}), so what frees
 * them comes that much later than their pins, taken now, say. Told without it, a client denied at a
 * bucket of 10 a minute came back at its 6 s and was refused, and passed at 7 s. With `until`, when
 * the isolate's last pin ends: a time told at or after that pin is settled (REPORT_GRACE_MS past
 * its end) is moved by how much later the object then counts the units (see `pinSpentAt`, ./peer),
 * since an isolate whose lease ran dry makes no call until its client comes back, and by then the
 * report is too late to place them where they went. Told from pins taken now, a crowd at a fast
 * sliding window of 10 a minute was told 60.1 s and refused then for a second more (its pins were
 * settled in the bucket of their lease's end), and a sliding log's for a second and a half.
 */
export function asFiled(standing: Decision, asked: Policy, policy: Policy, now: number, until?: number): Decision {
  const filed = slotEnd(asked, slotOf(asked, now));
  const onTime = takenAtATime(policy) && Number.isFinite(filed) && filed > now ? filed - now : 0;
  const settled = until === undefined ? 0 : placedLater(policy, now, pinSpentAt(policy, until, Number.POSITIVE_INFINITY));
  const moved = (at: number) => (until !== undefined && at + onTime >= until + REPORT_GRACE_MS ? Math.max(onTime, settled) : onTime);
  const moreAt = standing.moreAt + moved(standing.moreAt);
  // The full quota comes back as much later: left as it was, a denial's `reset` came before its `retryAfter`.
  const resetAt = standing.resetAt + moved(standing.resetAt);
  return { ...standing, resetAt, moreAt, retryAfter: standing.allowed ? 0 : standing.retryAfter + moved(now + standing.retryAfter) };
}

/**
 * How much later units taken at `to` free what they hold than the same units taken at `from`
 * (`from` ≤ `to`): the time between for an algorithm that takes them at a time, the distance
 * between their slots for one that counts them in slots.
 */
function placedLater(policy: Policy, from: number, to: number): number {
  if (!(to > from)) return 0;
  return takenAtATime(policy) ? to - from : slotOf(policy, to) - slotOf(policy, from);
}

/**
 * A denial decided under another live version's stricter policy (`others`), as the isolate must
 * read it: it ends, and more may come, within `intervalMs` at most, when it asks again. That
 * version may be gone by then, and the isolate's own looser policy is its to use: a key denied
 * under an old limit of 10 an hour stayed denied for the hour after a raise to 20 had taken over.
 */
export function soonerUnderOthers(standing: Decision, others: boolean, now: number, intervalMs: number): Decision {
  // An admission's `moreAt` is left as it is: more quota is not known to come any sooner.
  if (!others || standing.allowed) return standing;
  return { ...standing, moreAt: Math.min(standing.moreAt, now + intervalMs), retryAfter: Math.min(standing.retryAfter, intervalMs) };
}

/** The key's standing as every decision sees it: its state with every pinned unit taken now. */
export function standingWithPins(policy: Policy, state: LimiterState | undefined, peers: PeerIndex, now: number): Decision {
  return peek(policy, withPinned(policy, state, peers.pinned, now), now);
}

function withPinned(policy: Policy, state: LimiterState | undefined, pinned: number, now: number): LimiterState | undefined {
  return pinned > 0 ? adjust(policy, state, pinned, now, now) : state;
}
