import { describe, expect, it } from "vitest";
import { Metrics, WAIT_BUCKETS } from "../../src/metrics/metrics";

const lines = (text: string, prefix: string) => text.split("\n").filter((line) => line.startsWith(prefix));

describe("a histogram in the metrics", () => {
  it("renders cumulative buckets up to +Inf, then the sum and the count, per label set", () => {
    const registry = new Metrics();
    for (const seconds of [0.5, 0.25, 0.25, 7]) registry.observe("floodgate_object_wait_seconds", { rule: "api", mode: "strict" }, seconds);
    const text = registry.render();
    expect(text).toContain("# TYPE floodgate_object_wait_seconds histogram");
    const buckets = lines(text, "floodgate_object_wait_seconds_bucket");
    expect(buckets).toHaveLength(WAIT_BUCKETS.length + 1);
    expect(buckets[0]).toBe('floodgate_object_wait_seconds_bucket{le="0.005",mode="strict",rule="api"} 0');
    expect(buckets).toContain('floodgate_object_wait_seconds_bucket{le="0.25",mode="strict",rule="api"} 2');
    expect(buckets).toContain('floodgate_object_wait_seconds_bucket{le="0.5",mode="strict",rule="api"} 3');
    expect(buckets).toContain('floodgate_object_wait_seconds_bucket{le="5",mode="strict",rule="api"} 3');
    expect(buckets.at(-1)).toBe('floodgate_object_wait_seconds_bucket{le="+Inf",mode="strict",rule="api"} 4');
    expect(lines(text, "floodgate_object_wait_seconds_sum")).toEqual(['floodgate_object_wait_seconds_sum{mode="strict",rule="api"} 8']);
    expect(lines(text, "floodgate_object_wait_seconds_count")).toEqual(['floodgate_object_wait_seconds_count{mode="strict",rule="api"} 4']);
  });

  it("keeps each label set apart", () => {
    const registry = new Metrics();
    registry.observe("floodgate_object_wait_seconds", { rule: "a", mode: "fast" }, 0.01);
    registry.observe("floodgate_object_wait_seconds", { rule: "b", mode: "fast" }, 0.01);
    expect(registry.observations("floodgate_object_wait_seconds", { rule: "a", mode: "fast" })).toBe(1);
    expect(lines(registry.render(), "floodgate_object_wait_seconds_count")).toHaveLength(2);
  });
});
