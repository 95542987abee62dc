/** The header choices code passes to createGate and rateLimit: the same two the proxy reads from RATE_LIMIT_HEADERS and LEGACY_HEADERS. */
import { checkFlag } from "../limiter/arguments";
import { DEFAULT_HEADERS, HEADER_FORMS, type HeaderForm, type HeaderOptions } from "./rate-limit-headers";

export type { HeaderForm } from "./rate-limit-headers";

/** `{ headers?, legacyHeaders? }` as header options, defaults filled in; a TypeError naming the option for anything else. */
export function headerOptions(options: { headers?: unknown; legacyHeaders?: unknown }, where: string): HeaderOptions {
  const { headers = DEFAULT_HEADERS.form } = options;
  if (!HEADER_FORMS.includes(headers as HeaderForm)) {
    throw new TypeError(`${where}: headers must be ${HEADER_FORMS.map((f) => JSON.stringify(f)).join(", ")}, got ${JSON.stringify(headers)}`);
  }
  return { form: headers as HeaderForm, legacy: checkFlag(options.legacyHeaders, "legacyHeaders", where, DEFAULT_HEADERS.legacy) };
}
