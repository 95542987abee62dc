// gcra's delay from outside: a burst through `wrangler dev` passed, held and denied, spaced at a real origin; a client reset while held.
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startOrigin } from "../setup/origin-server";
import { useClusterFixture } from "./fixture";
import { arrivals, originUrlOf, startWranglerDev, type WranglerDev } from "./wrangler-dev";

const harness = useClusterFixture();

describe("a gcra burst through wrangler dev", () => {
  let dev: WranglerDev | undefined;
  let dir: string | undefined;
  let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;

  afterEach(async () => {
    await dev?.kill();
    await origin?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    dev = dir = origin = undefined;
  });

  it("passes 1 + delay at once, holds the rest of the burst one interval apart at the origin, and denies the others", async () => {
    origin = await startOrigin();
    const originUrl = originUrlOf(origin);
    // One unit every 200 ms; of a burst, 2 pass at once, 2 are held (200 and 400 ms), the rest get 429.
    const rules = [{ name: "hold-dev", key: "global", algorithm: "gcra", limit: 5, period: "1s", burst: 3, delay: 1 }];
    dir = await mkdtemp(join(tmpdir(), "floodgate-hold-"));
    dev = await startWranglerDev({ persistTo: dir, vars: { ORIGIN_URL: originUrl, RATE_LIMIT_RULES: JSON.stringify(rules) } });

    const started = Date.now();
    const responses = await Promise.all(Array.from({ length: 7 }, (_, i) => dev!.fetch(`/hold-dev/${i}`)));
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 429, 429, 429]);

    const at = await arrivals(originUrl, "hold-dev");
    expect(at).toHaveLength(4);
    // The held ones: never before their interval (counted from a decision made after `started`),
    // then one interval apart, give or take what a loaded 2-core machine adds to each arrival. The
    // first held one is not timed from the last passed at once: that one's arrival may be late by
    // as much as the machine's load, where held ones are released by the isolate's own timers.
    expect(at[2]! - started).toBeGreaterThanOrEqual(200);
    expect(at[3]! - started).toBeGreaterThanOrEqual(400);
    expect(at[3]! - at[2]!).toBeGreaterThanOrEqual(200 - 60);
    expect(at[3]! - at[2]!).toBeLessThan(200 + 150);
  }, 60_000);
});

describe("a client that resets its connection while held", () => {
  it("gets nothing proxied, and its unit back: the next request is held in its place", async () => {
    // One unit every 300 ms, burst 1, delay 0: the second request of a burst is held 300 ms.
    const rules = [{ name: "hold-reset", key: "global", algorithm: "gcra", limit: 10, period: "3s", burst: 1, delay: 0 }];
    const cluster = await harness.start({ isolates: 1, rules });
    expect((await cluster.fetch(0, "/hold-reset/first")).status).toBe(200);

    const socket = connect(Number(cluster.fronts[0]!.url.port), "127.0.0.1");
    socket.on("error", () => {});
    socket.write("GET /hold-reset/gone HTTP/1.1\r\nHost: floodgate.test\r\n\r\n");
    await new Promise((resolve) => setTimeout(resolve, 60));
    // A reset, not a FIN: local workerd takes a half-closed connection for a client still waiting.
    socket.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 60));

    expect((await cluster.fetch(0, "/hold-reset/next")).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const log = (await (await fetch(`${harness.originUrl()}/__origin/log?tag=hold-reset`)).json()) as { url: string }[];
    expect(log.map((r) => r.url).sort()).toEqual(["/hold-reset/first", "/hold-reset/next"]);
    expect(await cluster.metrics(0)).toContain('floodgate_holds_total{outcome="abandoned",rule="hold-reset"} 1');
  });
});
