// Path globs: anchoring, literal characters, and linear time on hostile input.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileGlob } from "../../src/routing/glob";

/** Reference semantics, straight from the definition: dynamic programming over (glob, path) prefixes. */
function referenceMatch(glob: string, path: string): boolean {
  // fits[j]: glob[0..i) matches path[0..j)
  let fits = Array.from({ length: path.length + 1 }, (_, j) => j === 0);
  for (const g of glob) {
    const next = new Array<boolean>(path.length + 1).fill(false);
    for (let j = 0; j <= path.length; j++) {
      next[j] = g === "*"
        ? fits[j]! || (j > 0 && next[j - 1]!)
        : j > 0 && fits[j - 1]! && path[j - 1] === g;
    }
    fits = next;
  }
  return fits[path.length]!;
}

describe("compileGlob", () => {
  it("matches a glob without * only against the identical path", () => {
    const match = compileGlob("/login");
    expect(match("/login")).toBe(true);
    expect(match("/login/")).toBe(false);
    expect(match("/x/login")).toBe(false);
  });

  it("matches every path, including the empty one, with a lone *", () => {
    const match = compileGlob("*");
    expect(match("")).toBe(true);
    expect(match("/a/b/c?")).toBe(true);
  });

  it("lets * span slashes", () => {
    expect(compileGlob("/api/*")("/api/v1/users/42")).toBe(true);
  });

  it("lets * match an empty run", () => {
    expect(compileGlob("/api/*")("/api/")).toBe(true);
  });

  it("anchors the glob at the start of the path", () => {
    expect(compileGlob("/api/*")("/v2/api/users")).toBe(false);
  });

  it("anchors the glob at the end of the path", () => {
    expect(compileGlob("*.json")("/data.json/extra")).toBe(false);
    expect(compileGlob("*.json")("/data.json")).toBe(true);
  });

  it("treats regex metacharacters and ? as literals", () => {
    const glob = "/v1.0/(a)+?[b]{2}$^|\\c";
    expect(compileGlob(glob)(glob)).toBe(true);
    expect(compileGlob("/a.b")("/axb")).toBe(false);
    expect(compileGlob("/a?")("/ab")).toBe(false);
  });

  it("treats a run of * like a single *", () => {
    const match = compileGlob("/a***b");
    expect(match("/ab")).toBe(true);
    expect(match("/a/x/b")).toBe(true);
    expect(match("/a/x/c")).toBe(false);
  });

  it("does not let the literal start and end overlap", () => {
    expect(compileGlob("/ab*ba")("/aba")).toBe(false);
    expect(compileGlob("/ab*ba")("/abba")).toBe(true);
  });

  it("requires the literal pieces between stars in order", () => {
    const match = compileGlob("/a*b*c");
    expect(match("/a-b-c")).toBe(true);
    expect(match("/a-c-b")).toBe(false);
  });

  it("does not let a middle piece run into the literal end", () => {
    // "b" occurs only inside the final "bc", which the end needs for itself.
    expect(compileGlob("/a*b*bc")("/a-bc")).toBe(false);
  });

  // A backtracking matcher needs astronomically many steps for these; a quadratic one blows the budget.
  it("answers hostile 10 KB paths within a few milliseconds", () => {
    const a = "/" + "a".repeat(10_000);
    const started = performance.now();
    expect(compileGlob("/" + "*".repeat(5_000) + "b")(a)).toBe(false);
    expect(compileGlob("/*a*a*a*a*a*a*a*a*a*a*b")(a)).toBe(false);
    expect(compileGlob("/" + "*a".repeat(2_000) + "*b")(a)).toBe(false);
    expect(compileGlob("/*a*a*a*a*a*a*a*a*a*a")(a)).toBe(true);
    expect(performance.now() - started).toBeLessThan(50);
  });

  it("agrees with the reference semantics", () => {
    const chars = fc.constantFrom("a", "b", "/", ".", "*", "?");
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 8 }), fc.string({ unit: chars, maxLength: 12 }), (glob, path) => {
        expect(compileGlob(glob)(path)).toBe(referenceMatch(glob, path));
      }),
      { numRuns: 5_000 },
    );
  });
});
