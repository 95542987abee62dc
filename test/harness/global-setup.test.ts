// The workers project's global setup: its origin, in a thread of its own, goes at teardown whatever it is still serving.
import { expect, it } from "vitest";
import type { TestProject } from "vitest/node";
import setup from "../setup/global";

it("tears the origin down at once while a request to it is still being answered", async () => {
  let port = 0;
  const teardown = await setup({ provide: (_: string, value: number) => (port = value) } as unknown as TestProject);
  const origin = `http://127.0.0.1:${port}`;
  // A slow origin answer a test left behind (a workerd still holding it when teardown runs, say).
  const held = fetch(`${origin}/teardown-held/x?wait=20000`).catch(() => undefined);
  const count = async () => ((await (await fetch(`${origin}/__origin/count?tag=teardown-held`)).json()) as { count: number }).count;
  while ((await count()) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  const started = Date.now();
  await teardown();
  expect(Date.now() - started).toBeLessThan(5_000);
  await held;
});
