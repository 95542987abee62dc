// A concurrency slot renewed at a slow object: the renewals keep pace with slotTtl, not with the object's answers.
import { describe, expect, it } from "vitest";
import { limiter } from "../../src/lib";
import { delayedAnswers, delayedCalls } from "../helpers/namespace";

const SLOW_RENEW_MS = 1_250;

/** Renewals that land a while after they were sent: the object applies each SLOW_RENEW_MS late. */
const slowRenewals = delayedCalls("renew", () => new Promise((resolve) => setTimeout(resolve, SLOW_RENEW_MS)));

describe("renewing a slot at a slow object", () => {
  it("keeps the slot of a request in flight though each renewal lands well after it was sent: the next is due a third of slotTtl after the last was sent", async () => {
    // slotTtl 3 s, a renewal due every second. Due a second after the last one's answer, the second renewal would be
    // sent at 3.25 s and land at 4.5 s, past the 4 s its predecessor (sent at 1 s) held the slot to; due a second after
    // the last was sent, it goes at 2.25 s and lands at 3.5 s. Either way half a second or more from the edge.
    const slots = limiter(slowRenewals, { name: "renew-slow", algorithm: "concurrency", limit: 1, slotTtl: "3s", timeout: "3s" });
    const first = await slots.limit("k");
    expect(first.success).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 4_600));
    expect(await slots.limit("k")).toMatchObject({ success: false, reason: "limit" });
    await first.release!();
    expect((await slots.limit("k")).success).toBe(true);
  });

  it("keeps the slot of a request whose admission came back late: the first renewal is due a third of slotTtl after the object took the slot", async () => {
    // slotTtl 6 s, a renewal due every 2 s. The object takes the slot at once, its answer comes back 5 s later. Due 2 s
    // after that answer, the first renewal would go at 7 s, a second after the slot ran out; due 2 s after the take, it
    // goes as the answer comes, at 5 s, and holds the slot to 11 s. The second request goes at about 6.5 s.
    let first = true;
    const slowAdmission = delayedAnswers("decide", () => (first ? ((first = false), new Promise((resolve) => setTimeout(resolve, 5_000))) : Promise.resolve()));
    const slots = limiter(slowAdmission, { name: "renew-late-take", algorithm: "concurrency", limit: 1, slotTtl: "6s", timeout: "10s" });
    const held = await slots.limit("k");
    expect(held.success).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await slots.limit("k")).toMatchObject({ success: false, reason: "limit" });
    await held.release!();
  });
});
