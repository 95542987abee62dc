// The rule sets the README shows in wrangler.toml form parse as written: a reader copying one gets no configuration error.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/rules";
import { ROOT } from "./root";

const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** Every `RATE_LIMIT_RULES = '…'` and `RATE_LIMIT_RULES = '''…'''` in a TOML block of the README, as the string wrangler would pass. */
function readmeRuleSets(): string[] {
  const blocks = [...README.matchAll(/```toml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  return blocks.flatMap((block) => [...block.matchAll(/^RATE_LIMIT_RULES = (?:'''\n([\s\S]*?)'''|'(.*)')$/gm)].map((m) => m[1] ?? m[2]!));
}

describe("the README's rule sets", () => {
  const sets = readmeRuleSets();

  it("are found: the Rules section's and the quick ones", () => {
    expect(sets.length).toBeGreaterThanOrEqual(3);
  });

  it.each(sets.map((text, i) => [i, text]))("parses rule set %i as written", (_, text) => {
    expect(parseConfig(text).rules.length).toBeGreaterThan(0);
  });
});
