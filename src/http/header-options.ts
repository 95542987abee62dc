/** The header choices code passes to createGate and rateLimit: the same two the proxy reads from RATE_LIMIT_HEADERS and LEGACY_HEADERS. */
import { DEFAULT_HEADERS, HEADER_FORMS, type HeaderForm, type HeaderOptions } from "./rate-limit-headers";

export type { HeaderForm } from "./rate-limit-headers";

/** `{ headers?, legacyHeaders? }` as header options, defaults filled in; a TypeError naming the option for anything else. */
export function headerOptions(options: { headers?: unknown; legacyHeaders?: unknown }, where: string): HeaderOptions {
  const { headers = DEFAULT_HEADERS.form, legacyHeaders = DEFAULT_HEADERS.legacy } = options;
  if (!HEADER_FORMS.includes(headers as HeaderForm)) {
    throw new TypeError(`${where}: headers must be ${HEADER_FORMS.map((f) => JSON.stringify(f)).join(", ")}, got ${JSON.stringify(headers)}`);
  }
  if (typeof legacyHeaders !== "boolean") throw new TypeError(`${where}: legacyHeaders must be true or false, got ${JSON.stringify(legacyHeaders)}`);
  return { form: headers as HeaderForm, legacy: legacyHeaders };
}
