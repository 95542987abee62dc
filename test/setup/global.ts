// Vitest global setup: starts the real origin server once and tells the tests its port.
import type { TestProject } from "vitest/node";
import { startOrigin } from "./origin-server";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const origin = await startOrigin();
  project.provide("originPort", origin.port);
  return origin.close;
}
