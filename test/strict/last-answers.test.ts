// The strict key's last answer, where onError "local" starts when its object falls silent.
import { describe, expect, it } from "vitest";
import type { Decision, Policy } from "../../src/algorithms";
import { ALONE, COLD_REFUSAL_MS } from "../../src/limiter/local-share";
import { LastAnswers } from "../../src/strict/last-answers";

const T0 = 1_700_000_040_000;
const window: Policy = { algorithm: "sliding-window", limit: 10, periodMs: 60_000, burst: 10, buckets: 60 };
const slots: Policy = { algorithm: "concurrency", limit: 10, periodMs: 60_000, burst: 10, buckets: 1 };
const answer: Decision = { allowed: true, limit: 10, remaining: 4, resetAt: T0 + 60_000, moreAt: T0 + 6_000, retryAfter: 0 };

describe("LastAnswers", () => {
  it("gives a key no answer has reached, of a rule another key's object has answered, as alone, with nothing known of what is left", () => {
    const answers = new LastAnswers();
    answers.heard("w", window, "w/b", answer, T0);
    expect(answers.shareOf("w", window, "w/a", T0)).toEqual(ALONE);
  });

  it("gives a key of a rule none of whose objects has answered no share, for COLD_REFUSAL_MS from its first asking", () => {
    const answers = new LastAnswers();
    expect(answers.shareOf("w", window, "w/a", T0).peers).toBe(0);
    expect(answers.shareOf("w", window, "w/b", T0 + COLD_REFUSAL_MS - 1).peers).toBe(0);
  });

  it("counts a rule none of whose objects has answered alone once COLD_REFUSAL_MS has passed since its first asking", () => {
    const answers = new LastAnswers();
    answers.shareOf("w", window, "w/a", T0);
    expect(answers.shareOf("w", window, "w/a", T0 + COLD_REFUSAL_MS)).toEqual(ALONE);
  });

  it("gives the units the key's last answer left, when it was heard, as left out of what this isolate admits", () => {
    const answers = new LastAnswers();
    answers.heard("w", window, "w/a", answer, T0);
    expect(answers.shareOf("w", window, "w/a", T0)).toEqual({ peers: 1, free: 4, heardAt: T0, apart: true });
  });

  it("reads the units an answer counted as used against the rule as it is now: a raised limit has more left", () => {
    const answers = new LastAnswers();
    answers.heard("w", window, "w/a", answer, T0);
    expect(answers.shareOf("w", { ...window, limit: 100, burst: 100 }, "w/a", T0).free).toBe(94);
  });

  it("gives a concurrency key none, whose slots come back by releases the local counters never see, even when its object last answered under another algorithm", () => {
    const answers = new LastAnswers();
    answers.heard("c", slots, "c/a", answer, T0);
    answers.heard("c", window, "c/b", answer, T0);
    expect([answers.shareOf("c", slots, "c/a", T0), answers.shareOf("c", slots, "c/b", T0)]).toEqual([ALONE, ALONE]);
  });

  it("forgets a key whose object was reset", () => {
    const answers = new LastAnswers();
    answers.heard("w", window, "w/a", answer, T0);
    answers.forget("w/a");
    expect(answers.shareOf("w", window, "w/a", T0)).toEqual(ALONE);
  });
});
