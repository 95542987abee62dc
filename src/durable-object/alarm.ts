/** When a RateLimiter's alarm goes off: kept here, free of `cloudflare:*`, so the simulation sets its objects' alarms as the class does. */

/** How long a fast-mode isolate's last answer is kept for its retries after it last synced. */
export const RETRY_WINDOW_MS = 60_000;

/** The most an object's alarm is set later than it is due, so that keys due together do not all wake together. */
const ALARM_SPREAD_MS = 10_000;

/**
 * An object's delay on every alarm, up to ALARM_SPREAD_MS, drawn from its id (hex). Fixed windows
 * turn together on the epoch, so every key of a rule would otherwise wake at once to clean up (a
 * thousand keys' alarms at one instant held up the requests arriving then for a minute under
 * wrangler dev); nothing an alarm does is due to the millisecond.
 */
export function alarmSpread(idHex: string): number {
  return parseInt(idHex.slice(0, 8), 16) % ALARM_SPREAD_MS;
}
