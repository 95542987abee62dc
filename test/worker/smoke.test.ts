import { expect, it } from "vitest";
import { originLog, send } from "../helpers/worker";

it("proxies to the real origin", async () => {
  const res = await send(new Request("http://floodgate.test/smoke/a?x=1"));
  expect(res.status).toBe(200);
  expect(await originLog("smoke")).toHaveLength(1);
});
