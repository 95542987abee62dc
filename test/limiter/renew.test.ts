// A concurrency slot renewed at a slow object: the renewals keep pace with slotTtl, not with the object's answers.
import { describe, expect, it } from "vitest";
import { limiter } from "../../src/lib";
import { delayedCalls } from "../helpers/namespace";

const SLOW_RENEW_MS = 600;

/** Renewals that land a while after they were sent: the object applies each SLOW_RENEW_MS late. */
const slowRenewals = delayedCalls("renew", () => new Promise((resolve) => setTimeout(resolve, SLOW_RENEW_MS)));

describe("renewing a slot at a slow object", () => {
  it("keeps the slot of a request in flight though each renewal lands well after it was sent: the next is due a third of slotTtl after the last was sent", async () => {
    // A renewal due 500 ms after the last one's answer would be sent at 1.6 s and land at 2.2 s, past the 2 s its
    // predecessor (sent at 0.5 s) held the slot to; due after it was sent, it goes at 1.1 s and lands at 1.7 s.
    const slots = limiter(slowRenewals, { name: "renew-slow", algorithm: "concurrency", limit: 1, slotTtl: "1500ms", timeout: "2s" });
    const first = await slots.limit("k");
    expect(first.success).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 2_600));
    expect(await slots.limit("k")).toMatchObject({ success: false, reason: "limit" });
    await first.release!();
    expect((await slots.limit("k")).success).toBe(true);
  });
});
