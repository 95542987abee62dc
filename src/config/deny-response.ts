/** `denyResponse`: what a rule's denial is answered with in place of the 429 problem+json (nginx's `limit_req_status`, Kong's `error_code` and `error_message`, a Cloudflare rate limiting rule's custom response). */
import { show, type RuleRef } from "./errors";
import { fail, fieldsOf, isObject, rejectUnknown, TOKEN } from "./fields";
import type { DenyResponse } from "./types";

const FIELDS = ["status", "body", "contentType"];
const DEFAULT_STATUS = 429;
const DEFAULT_CONTENT_TYPE = "text/plain; charset=utf-8";
const TOKEN_TEXT = TOKEN.source.slice(1, -1);
/** RFC 9110 §8.3.1: `type/subtype` and `; name=value` parameters, a value a token or a quoted string. */
const MEDIA_TYPE = new RegExp(`^${TOKEN_TEXT}/${TOKEN_TEXT}(?:[ \\t]*;[ \\t]*${TOKEN_TEXT}=(?:${TOKEN_TEXT}|"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\t \\x21-\\x7e])*"))*$`);

/**
 * Reads `denyResponse`, `{ status?, body?, contentType? }`; none when absent. `status` is 400 to
 * 599 (default 429); `body` the text sent as is, described by `contentType` (default
 * `text/plain; charset=utf-8`), which must parse as JSON when its type says JSON. Without a body
 * the denial is the 429 problem+json with `status` in its place.
 */
export function parseDenyResponse(value: unknown, at: RuleRef): DenyResponse | undefined {
  if (value === undefined) return undefined;
  const example = `{"status": 503}, or {"body": "{\\"error\\": \\"slow down\\"}", "contentType": "application/json"}`;
  if (!isObject(value)) fail(at, "denyResponse", `expected an object like ${example}, got ${show(value)}`);
  const fields = fieldsOf(value);
  rejectUnknown(fields, FIELDS, at, "denyResponse");
  if (fields.size === 0) fail(at, "denyResponse", `give a "status", a "body" or both, like ${example}; or remove it for the 429 problem+json`);
  const status = parseStatus(fields.get("status"), at);
  const body = fields.get("body");
  const contentType = fields.get("contentType");
  if (body === undefined) {
    if (contentType !== undefined) fail(at, "denyResponse.contentType", `says what "body" is, and there is none; give a "body", or remove "contentType"`);
    return { status };
  }
  if (typeof body !== "string") fail(at, "denyResponse.body", `expected a string, the body as sent (JSON written as a string: "{\\"error\\": \\"slow down\\"}"), got ${show(body)}`);
  const type = parseContentType(contentType, at);
  if (isJson(type)) requireJson(body, type, at);
  return { status, body: { text: body, contentType: type } };
}

function parseStatus(value: unknown, at: RuleRef): number {
  if (value === undefined) return DEFAULT_STATUS;
  if (!Number.isInteger(value) || (value as number) < 400 || (value as number) > 599) {
    fail(at, "denyResponse.status", `expected an HTTP status from 400 to 599 (default ${DEFAULT_STATUS}), like 503, got ${show(value)}`);
  }
  return value as number;
}

function parseContentType(value: unknown, at: RuleRef): string {
  if (value === undefined) return DEFAULT_CONTENT_TYPE;
  if (typeof value !== "string" || !MEDIA_TYPE.test(value)) {
    fail(at, "denyResponse.contentType", `expected a media type like "application/json" or "text/html; charset=utf-8", got ${show(value)}`);
  }
  return value;
}

/** `application/json`, `application/problem+json` and the like: whatever a client will parse as JSON. */
function isJson(contentType: string): boolean {
  const essence = contentType.split(";")[0]!.trim().toLowerCase();
  return essence === "application/json" || essence.endsWith("+json");
}

function requireJson(body: string, contentType: string, at: RuleRef): void {
  try {
    JSON.parse(body);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    fail(at, "denyResponse.body", `is not valid JSON (${reason}), and "contentType" says ${show(contentType)}: clients would fail to parse it`);
  }
}
