// What every cluster test file needs: one real origin for the file, and the test's cluster disposed after it.
import { afterAll, afterEach, beforeAll } from "vitest";
import { startOrigin } from "../setup/origin-server";
import { startCluster, type Cluster } from "./cluster";

export interface ClusterFixture {
  /** the origin's base URL, once the file's origin is up */
  originUrl(): string;
  /** starts a cluster in front of the origin, disposing the test's previous one first */
  start(options: Omit<Parameters<typeof startCluster>[0], "originUrl">): Promise<Cluster>;
}

/** Registers the file's hooks and returns the fixture. */
export function useClusterFixture(): ClusterFixture {
  let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;
  let current: Cluster | undefined;
  const originUrl = () => `http://127.0.0.1:${origin!.port}`;
  beforeAll(async () => {
    origin = await startOrigin();
  });
  afterEach(async () => {
    await current?.dispose();
    current = undefined;
  });
  afterAll(() => origin?.close());
  return {
    originUrl,
    async start(options) {
      await current?.dispose();
      current = await startCluster({ ...options, originUrl: originUrl() });
      return current;
    },
  };
}
