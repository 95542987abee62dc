// Members named twice in one JSON object, which JSON.parse keeps only the last of; where a text that is not JSON goes wrong.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { repeatedMember, syntaxErrorAt } from "../../src/config/json";

describe("repeatedMember", () => {
  it("finds a member named twice in a rule", () => {
    expect(repeatedMember('[{"name": "a", "limit": 2, "limit": 1000}]')).toEqual({ path: [0], name: "limit" });
  });

  it("finds one inside a nested object, with the path to it", () => {
    expect(repeatedMember('{"rules":[{"name":"x"},{"name":"y","match":{"path":"/a","path":"/b"}}]}')).toEqual({ path: ["rules", 1, "match"], name: "path" });
  });

  it("finds one at the top level", () => {
    expect(repeatedMember('{"rules":[],"rules":[]}')).toEqual({ path: [], name: "rules" });
  });

  it("compares names as JSON.parse reads them, escapes decoded", () => {
    expect(repeatedMember('[{"limit":1,"\\u006cimit":2}]')).toEqual({ path: [0], name: "limit" });
  });

  it("is not misled by quotes, brackets and braces inside strings", () => {
    expect(repeatedMember('[{"a":"x\\"}{,\\"a\\":","b":[1,{"c":"]","d":2}]}]')).toBeUndefined();
    expect(repeatedMember('[{"a":"x\\"y","b":[1,{"c":1,"c":2}]}]')).toEqual({ path: [0, "b", 1], name: "c" });
  });

  it("walks nesting as deep as JSON.parse takes without running out of stack", () => {
    const depth = 20_000;
    expect(repeatedMember(`[{"x":${"[".repeat(depth)}{"a":1,"a":2}${"]".repeat(depth)}}]`)?.name).toBe("a");
    expect(repeatedMember(`[{"x":${"[".repeat(depth)}${"]".repeat(depth)}}]`)).toBeUndefined();
  });

  it("finds nothing where each object names each member once, whatever the values", () => {
    expect(repeatedMember('[{"a":1},{"a":2}]')).toBeUndefined();
    expect(repeatedMember(" [ ] ")).toBeUndefined();
    expect(repeatedMember('{"rules":[{"name":"ok","limit":1e3,"x":true,"y":null,"z":-1.5,"w":{}}]}')).toBeUndefined();
  });
});

/** Whether JSON.parse reads `text`. */
function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

describe("syntaxErrorAt", () => {
  it("finds no fault in any JSON", () => {
    fc.assert(fc.property(fc.json(), (text) => syntaxErrorAt(text) === undefined), { numRuns: 2_000 });
  });

  it("finds a fault, inside the text or at its end, in exactly the texts JSON.parse refuses", () => {
    const mangled = fc.tuple(fc.json(), fc.nat(), fc.constantFrom("", ",", "]", "}", "/", "'", ":", "\\", '"', " ", "\n", "x")).map(([text, at, insert]) => {
      const i = at % (text.length + 1);
      return text.slice(0, i) + insert + text.slice(i + (insert === "" ? 1 : 0));
    });
    fc.assert(
      fc.property(mangled, (text) => {
        const at = syntaxErrorAt(text);
        expect(at === undefined).toBe(parses(text));
        if (at !== undefined) expect(at).toBeLessThanOrEqual(text.length);
      }),
      { numRuns: 5_000 },
    );
  });

  it("walks nesting as deep as JSON.parse takes without running out of stack", () => {
    expect(syntaxErrorAt(`${"[".repeat(20_000)}${"]".repeat(20_000)}`)).toBeUndefined();
    expect(syntaxErrorAt(`${"[".repeat(20_000)},${"]".repeat(20_000)}`)).toBe(20_000);
  });
});
