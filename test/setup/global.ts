// Vitest global setup: starts the real origin server once, in a thread of its own, and tells the tests its port.
import { once } from "node:events";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as delay } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import { build } from "esbuild";
import type { TestProject } from "vitest/node";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const origin = await startOriginThread();
  project.provide("originPort", origin.port);
  return origin.close;
}

/** Runs the thread: starts the origin, posts its port, and closes it when told to. */
const ENTRY = `
import { parentPort } from "node:worker_threads";
import { startOrigin } from "./origin-server";
startOrigin().then((origin) => {
  parentPort.once("message", () => origin.close().then(() => parentPort.postMessage("closed")));
  parentPort.postMessage(origin.port);
});
`;

/** How long the origin's close may wait on what it still serves before its thread is ended. */
const CLOSE_WITHIN_MS = 1_000;

/**
 * The origin in a worker thread: on vitest's main thread, which also transforms the modules of
 * the files being started and relays their messages, a request's arrival time (what the timing
 * tests read) could wait behind that work, the more so with two files running at once. Its close
 * waits a second at most, then ends the thread and its connections with it: a close waits on every
 * answer still being served (a held one), and a thread that had died would never reply; either
 * kept the test run from ending.
 */
async function startOriginThread(): Promise<{ port: number; close(): Promise<void> }> {
  const bundled = await build({
    stdin: { contents: ENTRY, resolveDir: dirname(fileURLToPath(import.meta.url)), loader: "ts" },
    bundle: true,
    platform: "node",
    format: "cjs",
    write: false,
    // ws's optional native helpers: it falls back to JavaScript when they are missing.
    external: ["bufferutil", "utf-8-validate"],
    logLevel: "silent",
  });
  const worker = new Worker(bundled.outputFiles[0]!.text, { eval: true });
  const [port] = (await once(worker, "message")) as [number];
  return {
    port,
    async close() {
      worker.postMessage("close");
      await Promise.race([once(worker, "message"), delay(CLOSE_WITHIN_MS, undefined, { ref: false })]);
      await worker.terminate();
    },
  };
}
