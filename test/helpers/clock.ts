/** Where a test that freezes `Date` starts its clock, so the Durable Objects it drives never spin on their alarms. */

const HOUR_MS = 3_600_000;

/**
 * A start for a frozen clock: on a whole hour (so every window of up to an hour starts there), one
 * to two hours past the real clock. An object schedules its alarm from the frozen clock; were that
 * in the real past, workerd would fire each alarm at once, the object would find the frozen time
 * short of what it waits for and set it again, over and over, and `abortAllDurableObjects` in the
 * middle of that wedges workerd so that the run never exits. An hour ahead, no alarm fires during
 * the run.
 */
export function frozenStart(): number {
  return (Math.floor(Date.now() / HOUR_MS) + 2) * HOUR_MS;
}
