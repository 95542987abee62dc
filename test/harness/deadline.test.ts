// A request whose object call is answered through another request (a strict batch) still gets its answer past its deadline: never cancelled by the runtime as hung.
import { describe, expect, it } from "vitest";
import { useWranglerDevWithOrigin } from "./wrangler-dev";

const rules = [{ name: "deadline-1ms", match: { path: "/deadline/*" }, key: "header:x-k", limit: 5, period: "1h", onError: "allow", timeout: "1ms" }];

/** Each line holding `needle`, with the eight lines before it: what was going on when the runtime said so. */
function linesAround(output: string, needle: string): string[] {
  const lines = output.split("\n");
  return lines.flatMap((line, i) => (line.includes(needle) ? [lines.slice(Math.max(0, i - 8), i + 1).join("\n")] : []));
}

describe("a strict rule's timeout through wrangler dev", () => {
  const served = useWranglerDevWithOrigin("deadline", rules);

  it("answers every request of a cold burst by the object or onError within a 1 ms timeout, none as hung", async () => {
    const statuses: number[] = [];
    const until = Date.now() + 2_000;
    // 40 clients at a cold object: the first call is slow, so requests time out while their batch is on its way.
    await Promise.all(
      Array.from({ length: 40 }, async () => {
        while (Date.now() < until) {
          const response = await served.dev.fetch("/deadline/x", { headers: { "x-k": "cold" } });
          await response.arrayBuffer();
          statuses.push(response.status);
        }
      }),
    );
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(5);
    expect(linesAround(served.dev.output(), "hung")).toEqual([]);
  }, 60_000);
});
