// A wait that another request's code ends is answered by the waiting request's own code, by its deadline, whenever that other request's settling would reach it.
import { describe, expect, it } from "vitest";
import { handedBy, TimeoutError, type Handed } from "../../src/strict/timeout";

/** A wake the runtime has not delivered yet: another request's settling, on a saturated core. */
const undelivered = new Promise<never>(() => undefined);

describe("handedBy", () => {
  it("answers at its deadline with what was handed, though the wake never reached it", async () => {
    let handed: Handed<string> | undefined;
    let expired = false;
    const { answer, cancel } = handedBy(50, undelivered, () => handed, () => (expired = true));
    setTimeout(() => (handed = { value: "decided" }), 10);
    await expect(answer).resolves.toBe("decided");
    cancel();
    expect(expired).toBe(false);
  });

  it("answers at its deadline with the error handed, though the wake never reached it", async () => {
    let handed: Handed<string> | undefined;
    const { answer, cancel } = handedBy(50, undelivered, () => handed, () => new TimeoutError("expired"));
    setTimeout(() => (handed = { error: new Error("overloaded") }), 10);
    await expect(answer).rejects.toThrow("overloaded");
    cancel();
  });

  it("answers with expire's error when nothing was handed by its deadline", async () => {
    const { answer, cancel } = handedBy(10, undelivered, () => undefined, () => new TimeoutError("no decision within 10ms"));
    await expect(answer).rejects.toBeInstanceOf(TimeoutError);
    cancel();
  });

  it("answers as soon as it is woken, not at its deadline", async () => {
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const { answer, cancel } = handedBy(5_000, woken, () => ({ value: "decided" }), () => new TimeoutError("expired"));
    const started = Date.now();
    wake();
    await expect(answer).resolves.toBe("decided");
    expect(Date.now() - started).toBeLessThan(1_000);
    cancel();
  });
});
