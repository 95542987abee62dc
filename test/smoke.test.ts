import { SELF } from "cloudflare:test";
import { it, expect } from "vitest";
it("answers", async () => { expect(await (await SELF.fetch("http://x/")).text()).toBe("hi"); });
