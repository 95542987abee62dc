/** How far each isolate is from a key's Durable Object: a round-trip time per isolate, and a little jitter per call. */
import type { Random } from "../lib/random";

/** One band of the round-trip-time mixture: a share of isolates, uniform between `loMs` and `hiMs`. */
export interface RttBand {
  share: number;
  loMs: number;
  hiMs: number;
  label: string;
}

/**
 * The mixture every "mixed" scenario draws each isolate's round trip to the object from.
 *
 * A key's object lives in one data center, near where it was first asked for (Cloudflare's Durable
 * Objects "Data location" page), and every isolate elsewhere calls it across the network. The
 * bands are the issue's, and agree with public city-to-city ping tables (WonderProxy's "Miles per
 * Millisecond": Milan–Zurich 11 ms, Paris–Milan 21 ms, Dallas–Fremont 44 ms, New York–Paris 78 ms,
 * Baltimore–Sydney 251 ms, Paris–Sydney 349 ms): the same region, another region of the same or a
 * neighbouring continent, the other side of the world.
 */
export const MIXED_RTT: readonly RttBand[] = [
  { share: 0.4, loMs: 5, hiMs: 30, label: "same region (5–30 ms)" },
  { share: 0.45, loMs: 30, hiMs: 120, label: "another region (30–120 ms)" },
  { share: 0.15, loMs: 120, hiMs: 300, label: "far side of the world (120–300 ms)" },
];

/**
 * The round trip between an isolate and its location's relay, drawn once per location: uniform in
 * this band (an assumption). A relay object is created near the first request that names it, in a
 * nearby data center that hosts Durable Objects (Cloudflare's Durable Objects "Data location"
 * page), so the same city or a neighbouring one: a few ms, as Milan–Zurich's 11 ms bounds it.
 */
export const RELAY_RTT = { loMs: 1, hiMs: 10 } as const;

/**
 * The continents a key's locations are spread over, by share of the locations (Cloudflare's
 * `request.cf.continent` codes; Antarctica has none): an assumption, roughly where Cloudflare's
 * cities are. With `aggregate: "continent"` each continent has one relay for the key, and the key's
 * object is on the first (see {@link placeOnContinents}).
 */
export const CONTINENTS: readonly { code: string; share: number }[] = [
  { code: "NA", share: 0.3 },
  { code: "EU", share: 0.3 },
  { code: "AS", share: 0.25 },
  { code: "SA", share: 0.07 },
  { code: "OC", share: 0.04 },
  { code: "AF", share: 0.04 },
];

/**
 * The round trip between a location and its continent's relay, drawn once per location: uniform in
 * this band (an assumption). The relay sits near the first request that named it, somewhere on the
 * continent: WonderProxy's tables put Milan–Zurich at 11 ms, Paris–Milan at 21 ms and Dallas–Fremont
 * at 44 ms; a continent's far corners are further.
 */
export const CONTINENT_RTT = { loMs: 10, hiMs: 60 } as const;

/** Where one location of a continental scenario is: its continent, its round trip to that continent's relay, and the relay's to the key's object. */
export interface ContinentalPlace {
  continent: string;
  nearMs: number;
  hubMs: number;
}

/**
 * Puts locations whose round trips to the key's object are `farMs` on the continents, as bands of
 * distance from it: the nearest CONTINENTS[0]'s share of them (a key's object lives near its first
 * request, likeliest on the continent with the most locations), the next nearest CONTINENTS[1]'s,
 * and so on. Each continent's relay sits at one of its locations, drawn (it is created near the
 * first request that names it), so its round trip to the key's object is that location's. A
 * location's round trip to its relay is drawn in CONTINENT_RTT, and is at least the difference of
 * the two round trips to the key's object, as the triangle inequality asks. Continents drawn apart
 * from the round trips (as the model first had them) put relays 250 ms from an object their
 * locations reach in 10 ms, and the other way round, and a run's figures hung on six draws.
 */
export function placeOnContinents(farMs: readonly number[], random: Random): ContinentalPlace[] {
  const continents: string[] = [];
  farMs
    .map((ms, k) => ({ ms, k }))
    .sort((a, b) => a.ms - b.ms)
    .forEach(({ k }, rank) => (continents[k] = continentAt(rank, farMs.length)));
  const hubs = new Map<string, number>();
  for (const { code } of CONTINENTS) {
    const members = farMs.flatMap((ms, k) => (continents[k] === code ? [ms] : []));
    if (members.length > 0) hubs.set(code, members[Math.floor(random.next() * members.length)]!);
  }
  return farMs.map((ms, k) => {
    const continent = continents[k]!;
    const hubMs = hubs.get(continent)!;
    return { continent, hubMs, nearMs: Math.max(random.uniform(CONTINENT_RTT.loMs, CONTINENT_RTT.hiMs), Math.abs(ms - hubMs)) };
  });
}

/** The continent of location `k` of `locations` (by distance from the key's object, see {@link placeOnContinents}): the first locations are CONTINENTS[0]'s, by share. */
export function continentAt(k: number, locations: number): string {
  let acc = 0;
  for (const { code, share } of CONTINENTS) {
    acc += share * locations;
    if (k < acc) return code;
  }
  return CONTINENTS[CONTINENTS.length - 1]!.code;
}

/** Per-call variation of each leg: uniform between these factors of half the isolate's round trip. */
export const JITTER = [0.9, 1.25] as const;

/** How isolates' round trips are drawn: the mixture above, or one fixed figure for every isolate. */
export type RttModel = "mixed" | { fixedMs: number };

/** An isolate's round trip to the object, in ms. */
export function drawRtt(model: RttModel, random: Random): number {
  if (model !== "mixed") return model.fixedMs;
  const u = random.next();
  let acc = 0;
  for (const band of MIXED_RTT) {
    acc += band.share;
    if (u < acc) return random.uniform(band.loMs, band.hiMs);
  }
  const last = MIXED_RTT[MIXED_RTT.length - 1]!;
  return random.uniform(last.loMs, last.hiMs);
}

/** The band an isolate's round trip falls in, for reports by distance. */
export function bandOf(rttMs: number): number {
  const i = MIXED_RTT.findIndex((b) => rttMs < b.hiMs);
  return i === -1 ? MIXED_RTT.length - 1 : i;
}

/** One leg of one call (isolate to object, or back), in ms. */
export function legMs(rttMs: number, random: Random): number {
  return (rttMs / 2) * random.uniform(JITTER[0], JITTER[1]);
}
