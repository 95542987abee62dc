// A fast key asked under two policies of one rule name (plans chosen per request): decided in the isolate, never spending one plan's lease under a stricter one.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { decideFast, type FastContext } from "../../src/fast";
import { metrics } from "../../src/metrics/metrics";
import { delayedSyncs } from "../helpers/namespace";
import { rule } from "../helpers/rules";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const syncs = () => metrics.value("floodgate_durable_object_calls_total", { method: "sync" });
const settle = async (pending: Promise<unknown>[]) => {
  while (pending.length) await pending.shift()!.catch(() => undefined);
};

describe("a fast key under two plans of one rule name", () => {
  it("decides alternating plans from the lease, not with a sync per request", async () => {
    const pending: Promise<unknown>[] = [];
    const context: FastContext = { namespace: env.LIMITER, waitUntil: (p) => void pending.push(p) };
    const free = rule({ name: "plans-alt", mode: "fast", aggregate: undefined, limit: 1_000, periodMs: 3_600_000, syncMs: 60_000 });
    const pro = rule({ name: "plans-alt", mode: "fast", aggregate: undefined, limit: 2_000, periodMs: 3_600_000, syncMs: 60_000 });
    await decideFast(context, pro, "plans-alt/k", 1);
    await decideFast(context, free, "plans-alt/k", 1);
    await settle(pending);
    const before = syncs();

    for (let i = 0; i < 20; i++) expect(await decideFast(context, i % 2 ? pro : free, "plans-alt/k", 1)).toMatchObject({ allowed: true });
    await settle(pending);

    expect(syncs() - before).toBeLessThanOrEqual(2);
  });

  it("never admits a stricter plan's request from a lease granted under a looser one, joined or held", async () => {
    const pending: Promise<unknown>[] = [];
    let delay = 0;
    const context: FastContext = { namespace: delayedSyncs(() => sleep(delay)), waitUntil: (p) => void pending.push(p) };
    const free = rule({ name: "plans-race", mode: "fast", aggregate: undefined, limit: 3, periodMs: 3_600_000, syncMs: 60_000 });
    const pro = rule({ name: "plans-race", mode: "fast", aggregate: undefined, limit: 100, periodMs: 3_600_000, syncMs: 60_000 });
    let freeAdmitted = 0;
    for (let i = 0; i < 5; i++) if ((await decideFast(context, free, "plans-race/k", 1)).allowed) freeAdmitted++;
    await settle(pending);
    delay = 100;
    const proFirst = decideFast(context, pro, "plans-race/k", 1);
    await sleep(10);
    const freeJoined = decideFast(context, free, "plans-race/k", 1);
    const [proDecided, joined] = await Promise.all([proFirst, freeJoined]);
    delay = 0;
    const later: boolean[] = [];
    for (let i = 0; i < 10; i++) later.push((await decideFast(context, free, "plans-race/k", 1)).allowed);
    await settle(pending);

    expect({ freeAdmitted, pro: proDecided.allowed, joined: joined.allowed, later: later.filter(Boolean).length }).toEqual({ freeAdmitted: 3, pro: true, joined: false, later: 0 });
  });

  it("admits each plan's requests that joined one sync by their own figures: a pro request is not denied by a free answer", async () => {
    const pending: Promise<unknown>[] = [];
    let delay = 0;
    const context: FastContext = { namespace: delayedSyncs(() => sleep(delay)), waitUntil: (p) => void pending.push(p) };
    const free = rule({ name: "plans-joined", mode: "fast", aggregate: undefined, limit: 3, periodMs: 3_600_000, syncMs: 60_000 });
    const pro = rule({ name: "plans-joined", mode: "fast", aggregate: undefined, limit: 100, periodMs: 3_600_000, syncMs: 60_000 });
    let freeAdmitted = 0;
    for (let i = 0; i < 4; i++) if ((await decideFast(context, free, "plans-joined/k", 1)).allowed) freeAdmitted++;
    await settle(pending);
    delay = 100;
    const first = decideFast(context, pro, "plans-joined/k", 1);
    await sleep(10);
    const joined = [free, pro, free].map((plan) => decideFast(context, plan, "plans-joined/k", 1));
    const decided = await Promise.all([first, ...joined]);
    delay = 0;
    for (let i = 0; i < 5; i++) if ((await decideFast(context, free, "plans-joined/k", 1)).allowed) freeAdmitted++;
    await settle(pending);

    expect({ freeAdmitted, decided: decided.map((d) => d.allowed) }).toEqual({ freeAdmitted: 3, decided: [true, false, true, false] });
  });

  it("asks again under a request's own figures when another plan's request switched the key while it waited", async () => {
    const pending: Promise<unknown>[] = [];
    const context: FastContext = { namespace: delayedSyncs(() => sleep(100)), waitUntil: (p) => void pending.push(p) };
    const free = rule({ name: "plans-switched", mode: "fast", aggregate: undefined, limit: 1_000, periodMs: 3_600_000, syncMs: 60_000, timeoutMs: 2_000 });
    const pro = rule({ name: "plans-switched", mode: "fast", aggregate: undefined, limit: 2_000, periodMs: 3_600_000, syncMs: 60_000, timeoutMs: 2_000 });
    const first = decideFast(context, free, "plans-switched/k", 1);
    await sleep(5);
    const costly = decideFast(context, free, "plans-switched/k", 500);
    await sleep(5);
    const other = decideFast(context, pro, "plans-switched/k", 1);
    const decided = await Promise.all([first, costly, other]);
    await settle(pending);

    expect(decided.map((d) => d.allowed)).toEqual([true, true, true]);
  });
});
