// The bench's pieces start and produce numbers: the SVG renderer, and the end-to-end and attack parts at smoke-test size.
import { describe, expect, it } from "vitest";
import { run as attack, type AttackData } from "../../bench/attack";
import { run as accuracy } from "../../bench/accuracy";
import { run as decisionCost } from "../../bench/decision-cost";
import { run as endToEnd, type EndToEndData } from "../../bench/end-to-end";
import type { ChartSpec } from "../../bench/lib/section";
import { renderChart } from "../../bench/lib/svg";
import { keptParts } from "../../bench/lib/kept";
import { staleCharts, standingBlock, withStanding } from "../../bench/main";

describe("the bench's SVG renderer", () => {
  it("draws a bar chart with its categories, both series in the legend, ticks from zero and escaped text", () => {
    const spec: ChartSpec = {
      file: "smoke",
      title: "Throughput <relative> & more",
      kind: "bar",
      xLabel: "variant",
      yLabel: "× bare",
      categories: ["strict", "fast"],
      series: [
        { name: "1,000 IPs", points: [[0, 0.61], [1, 0.97]] },
        { name: "hot key", points: [[0, 0.8], [1, 0.99]] },
      ],
    };
    const svg = renderChart(spec);

    expect(svg.startsWith("<svg xmlns=\"http://www.w3.org/2000/svg\"")).toBe(true);
    expect(svg.trim().endsWith("</svg>")).toBe(true);
    expect(svg).toContain("Throughput &lt;relative&gt; &amp; more");
    for (const text of [">strict<", ">fast<", ">1,000 IPs<", ">hot key<", ">variant<", ">0<", ">0.97<"]) expect(svg).toContain(text);
    expect(svg.match(/<rect [^>]*><title>/g)).toHaveLength(4);
  });

  it("draws a line chart on a log axis when x spans decades, and says so", () => {
    const svg = renderChart({
      file: "smoke-line",
      title: "cost",
      kind: "line",
      xLabel: "keys",
      yLabel: "ns",
      series: [{ name: "a", points: [[10, 1], [10_000, 3]] }],
    });
    expect(svg).toContain("keys (log scale)");
    expect(svg).toContain("<polyline");
    expect(svg).toContain(">10k<");
  });

  it("says there is no data rather than drawing empty axes", () => {
    const svg = renderChart({ file: "empty", title: "t", kind: "line", xLabel: "x", yLabel: "y", series: [{ name: "a", points: [[1, Number.NaN]] }] });
    expect(svg).toContain("no data");
  });
});

describe("the bench's end-to-end part", () => {
  it("runs the bare Worker and floodgate strict through workerd and reports ratios", async () => {
    const section = await endToEnd({ quick: true, tiny: true, log: () => undefined });
    const data = section.data as EndToEndData;

    expect(data.failures).toEqual([]);
    const bare = data.summary.find((s) => s.variant === "bare" && s.phase === "saturated");
    const strict = data.summary.find((s) => s.variant === "strict-ips" && s.phase === "saturated");
    expect(bare?.rps).toBeGreaterThan(0);
    expect(strict?.rps).toBeGreaterThan(0);
    expect(strict?.rpsRatio).toBeGreaterThan(0);
    expect(strict?.non2xx).toBe(0);
    expect(data.counters["strict-ips"]?.durableObjectCalls.decide).toBeGreaterThan(0);
    expect(section.markdown).toContain("floodgate strict");
    expect(section.verdicts?.map((v) => v.target)).toEqual([
      "floodgate strict at least 0.6× the bare Worker's throughput",
      "floodgate fast at least 0.95× the bare Worker's throughput",
    ]);
    expect(section.verdicts?.[0]?.measured).toMatch(/^\d+\.\d\d× with 1,000 IPs$/);
    expect(section.headline).toContain("strict");
    expect(section.charts.map((c) => c.file)).toEqual(["e2e-throughput", "e2e-cpu", "e2e-latency"]);
  }, 60_000);
});

describe("the bench's report", () => {
  const section = (id: string, headline: string, met?: boolean) => ({
    id,
    status: "ok" as const,
    section: { id, title: id, markdown: "", charts: [], data: null, headline, verdicts: met === undefined ? [] : [{ target: id, measured: "x", met }] },
  });
  const parts = [
    section("decision-cost", "Decisions are fast.", true),
    section("accuracy", "Rarely wrong.", true),
    section("end-to-end", "Nearly free.", false),
    section("fast-path", "Within the limit."),
    section("cost", "Cheap."),
  ];

  it("writes the README's standing in three lines from the parts' headlines, with the count of targets met", () => {
    const block = standingBlock(parts)!;
    const lines = block.split("\n").filter((l) => l.startsWith("- "));
    expect(lines).toEqual([
      "- **Accuracy.** Strict mode admits exactly the limit. Rarely wrong. Within the limit.",
      "- **Speed.** Decisions are fast. Nearly free.",
      "- **Cost.** Cheap. 2 of 3 targets met; the misses and why: [Targets](bench/RESULTS.md#targets).",
    ]);
  });

  it("leaves the standing alone when a part it quotes did not run", () => {
    expect(standingBlock(parts.filter((p) => p.id !== "cost"))).toBeUndefined();
  });

  it("quotes a part kept from the run before as it quotes one that ran", () => {
    const kept = parts.map((p) => (p.id === "accuracy" ? { ...p, status: "kept" as const } : p));
    expect(standingBlock(kept)).toBe(standingBlock(parts));
  });

  it("replaces only what lies between the README's markers, and nothing without them", () => {
    const block = standingBlock(parts)!;
    const [start, end] = [block.split("\n")[0]!, block.split("\n").at(-1)!];
    const readme = `# x\n\n${start}\nold figures\n${end}\n\n## Quick start\n`;
    expect(withStanding(readme, block)).toBe(`# x\n\n${block}\n\n## Quick start\n`);
    expect(withStanding("# no markers\n", block)).toBeUndefined();
  });
});

describe("the bench's computing parts", () => {
  // Their work is synchronous or awaits only settled promises: without a turn of the loop between its steps, a SIGINT
  // waited for the whole part (93 s for decision-cost, 31 s for accuracy on a full run here), which then wrote
  // bench/RESULTS.md as if nothing had been asked.
  it.each([
    ["decision-cost", decisionCost],
    ["accuracy", accuracy],
  ])("%s lets the event loop turn as it goes, so a Ctrl-C (the bench's SIGINT handler) stops it there", async (_, run) => {
    let turns = 0;
    let running = true;
    const tick = () => running && (turns++, setImmediate(tick));
    setImmediate(tick);
    await run({ quick: true, tiny: true, log: () => undefined }).finally(() => (running = false));
    expect(turns).toBeGreaterThan(4);
  }, 30_000);
});

describe("a whole bench run's charts", () => {
  it("are replaced once its parts have run: it then removes the charts none of them drew, a failed part's and one that failed to render", () => {
    const chart = (file: string): ChartSpec => ({ file, title: file, kind: "bar", xLabel: "", yLabel: "", series: [] });
    const ran = { status: "ok" as const, section: { id: "a", title: "A", markdown: "", charts: [chart("kept"), chart("broken")], data: null }, chartErrors: ["broken: no data"] };
    const failed = { status: "failed" as const, chartErrors: [] };
    expect(staleCharts(["kept.svg", "broken.svg", "failed-part.svg", "notes.txt"], [ran, failed])).toEqual(["broken.svg", "failed-part.svg"]);
  });
});

describe("a partial bench run", () => {
  const markdown = [
    "# floodgate benchmarks",
    "",
    "## Targets",
    "",
    "| target | this run |",
    "",
    "## Accuracy",
    "",
    "*Re-run alone at commit abc.*",
    "",
    "### Method",
    "",
    "Replayed.",
    "",
    "## Fast path",
    "",
    "**Method.** Within the limit.",
    "",
  ].join("\n");
  const json = JSON.stringify({
    generatedAt: "2026-11-24T00:03:25.349Z",
    command: "npm run bench",
    machine: { commit: "c105cfa" },
    parts: [
      { id: "accuracy", title: "Accuracy", status: "ok", seconds: 24.1, charts: [], verdicts: [{ target: "wrong less often", measured: "5.9×", met: true }], headline: "Rarely wrong.", data: { rows: 1 } },
      { id: "fast-path", title: "Fast path", status: "ok", seconds: 339.8, charts: [], verdicts: [], headline: null, data: null },
      { id: "cost", title: "Cost", status: "skipped", seconds: 0, charts: [], verdicts: [], headline: null, data: null },
    ],
  });

  it("keeps each part of the run before with its section up to the next part's heading, its targets, headline and numbers", () => {
    const kept = keptParts(markdown, json);
    expect([...kept.keys()]).toEqual(["accuracy", "fast-path"]);
    expect(kept.get("accuracy")).toEqual({
      seconds: 24.1,
      section: { id: "accuracy", title: "Accuracy", markdown: "*Re-run alone at commit abc.*\n\n### Method\n\nReplayed.", charts: [], data: { rows: 1 }, verdicts: [{ target: "wrong less often", measured: "5.9×", met: true }], headline: "Rarely wrong." },
    });
  });

  it("says where a kept section comes from when it does not say so itself", () => {
    expect(keptParts(markdown, json).get("fast-path")?.section.markdown).toBe("*From `npm run bench` at commit c105cfa, 2026-11-24.*\n\n**Method.** Within the limit.");
  });

  it("keeps nothing when the results file is not JSON", () => {
    expect(keptParts(markdown, "not json").size).toBe(0);
  });
});

describe("the bench's attack part", () => {
  it("measures the rotating-key client's object calls now and at the commit before the fix", async () => {
    const section = await attack({ quick: true, tiny: true, log: () => undefined });
    const data = section.data as AttackData;
    const line = (scenario: string, version: string) => data.lines.find((l) => l.scenario === scenario && l.version === version);

    // A clone without that commit (a shallow one) measures only the present, and says why.
    if (data.before.built) {
      expect(line("limited-ip", "before")?.callsPerRequest).toBeGreaterThan(2);
      expect(line("limited-ip", "now")?.callsPerRequest).toBeLessThan(line("limited-ip", "before")!.callsPerRequest);
    } else {
      expect(data.before.why).toMatch(/\S/);
      expect(line("limited-ip", "now")?.callsPerRequest).toBeLessThan(1);
    }
    expect(line("rotating-capped", "now")?.admitted).toBeGreaterThan(0);
    // At smoke size the calls of the first, concurrent requests weigh too much for the 10× target to mean anything.
    expect(section.verdicts?.map((v) => typeof v.met)).toEqual(["boolean", "boolean"]);
    expect(section.verdicts?.[1]?.met).toBe(true);
  }, 60_000);
});
