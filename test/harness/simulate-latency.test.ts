// The simulator's geography: continents as bands of distance from the key's object, and relays whose round trips agree with their locations'.
import { describe, expect, it } from "vitest";
import { Random } from "../../bench/lib/random";
import { continentAt, CONTINENTS, drawRtt, placeOnContinents } from "../../bench/simulation/latency";

const far = (n: number, seed = 1) => {
  const random = new Random(seed);
  return Array.from({ length: n }, () => drawRtt("mixed", random));
};

describe("placeOnContinents", () => {
  it("puts the locations nearest the key's object on the first continent, and each continent's by share", () => {
    const farMs = far(300);
    const places = placeOnContinents(farMs, new Random(2));
    const first = farMs.filter((_, k) => places[k]!.continent === CONTINENTS[0]!.code);
    const rest = farMs.filter((_, k) => places[k]!.continent !== CONTINENTS[0]!.code);
    expect(Math.max(...first)).toBeLessThanOrEqual(Math.min(...rest));
    const byShare = Array.from({ length: 300 }, (_, k) => continentAt(k, 300));
    for (const { code } of CONTINENTS) expect(places.filter((p) => p.continent === code).length, code).toBe(byShare.filter((c) => c === code).length);
  });

  it("sits each continent's relay at one of its locations, as far from the key's object as that location", () => {
    const farMs = far(300);
    const places = placeOnContinents(farMs, new Random(2));
    for (const { code } of CONTINENTS) {
      const on = farMs.filter((_, k) => places[k]!.continent === code);
      const hubs = new Set(places.filter((p) => p.continent === code).map((p) => p.hubMs));
      expect(hubs.size, code).toBe(1);
      expect(on, code).toContain([...hubs][0]);
    }
  });

  it("keeps every path through a relay within the triangle inequality", () => {
    const farMs = far(300, 3);
    placeOnContinents(farMs, new Random(4)).forEach(({ nearMs, hubMs }, k) => {
      expect(nearMs).toBeGreaterThanOrEqual(Math.abs(farMs[k]! - hubMs));
      expect(nearMs).toBeGreaterThanOrEqual(10);
    });
  });
});
