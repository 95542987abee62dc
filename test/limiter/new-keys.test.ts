// newKeysPerSecond: an isolate starts tracking at most that many keys of a rule per second; the rest share #overflow.
import { describe, expect, it } from "vitest";
import { admitKey, keyAsPeeked } from "../../src/limiter/new-keys";
import { OVERFLOW_KEY } from "../../src/routing/key-text";
import { metrics } from "../../src/metrics/metrics";
import { rule } from "../helpers/rules";

const T0 = 1_700_000_000_000;

describe("admitKey", () => {
  it("keeps every key when the rule sets no cap", () => {
    const open = rule({ name: "nk-open" });
    expect(Array.from({ length: 100 }, (_, i) => admitKey(open, `k${i}`, T0))).toEqual(Array.from({ length: 100 }, (_, i) => `k${i}`));
  });

  it("tracks newKeysPerSecond new keys in a second and counts the rest under #overflow", () => {
    const capped = rule({ name: "nk-cap", newKeysPerSecond: 3 });
    const keys = ["a", "b", "c", "d", "e"].map((k) => admitKey(capped, k, T0));
    expect(keys).toEqual(["a", "b", "c", OVERFLOW_KEY, OVERFLOW_KEY]);
  });

  it("keeps counting a tracked key under its own name, whatever the allowance", () => {
    const capped = rule({ name: "nk-known", newKeysPerSecond: 1 });
    admitKey(capped, "a", T0);
    expect(admitKey(capped, "b", T0)).toBe(OVERFLOW_KEY);
    expect(admitKey(capped, "a", T0)).toBe("a");
  });

  it("allows new keys again as the second passes, one every 1/newKeysPerSecond", () => {
    const capped = rule({ name: "nk-refill", newKeysPerSecond: 2 });
    admitKey(capped, "a", T0);
    admitKey(capped, "b", T0);
    expect(admitKey(capped, "c", T0 + 499)).toBe(OVERFLOW_KEY);
    expect(admitKey(capped, "d", T0 + 500)).toBe("d");
  });

  it("counts each overflow in floodgate_key_overflows_total", () => {
    const capped = rule({ name: "nk-metric", newKeysPerSecond: 1 });
    const before = metrics.value("floodgate_key_overflows_total", { rule: "nk-metric" });
    for (const k of ["a", "b", "c"]) admitKey(capped, k, T0);
    expect(metrics.value("floodgate_key_overflows_total", { rule: "nk-metric" }) - before).toBe(2);
  });
});

describe("keyAsPeeked", () => {
  it("names a key as its request would be counted now: its own while tracked or while the allowance lasts, #overflow past it", () => {
    const capped = rule({ name: "nk-peek", newKeysPerSecond: 1 });
    expect(keyAsPeeked(capped, "a", T0)).toBe("a");
    admitKey(capped, "a", T0);
    expect(keyAsPeeked(capped, "a", T0)).toBe("a");
    expect(keyAsPeeked(capped, "b", T0)).toBe(OVERFLOW_KEY);
  });

  it("starts tracking nothing and takes nothing from the allowance", () => {
    const capped = rule({ name: "nk-peek-free", newKeysPerSecond: 1 });
    expect([keyAsPeeked(capped, "a", T0), keyAsPeeked(capped, "b", T0)]).toEqual(["a", "b"]);
    expect(admitKey(capped, "b", T0)).toBe("b");
  });
});
