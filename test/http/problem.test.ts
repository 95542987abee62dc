// Problem responses: RFC 9457 bodies, status codes and headers.
import { describe, expect, it } from "vitest";
import { badGateway, HttpProblem, invalidConfig, invalidRequest, notFound, QUOTA_EXCEEDED, rateLimited, unauthorized } from "../../src/http/problem";

describe("HttpProblem", () => {
  const problem = new HttpProblem({ type: "invalid-request", status: 400, title: "Invalid Request", detail: "bad cost" });

  it("is an Error whose message is the detail", () => {
    expect(problem).toBeInstanceOf(Error);
    expect(problem.message).toBe("bad cost");
    expect(problem.name).toBe("HttpProblem");
  });

  it("answers with its status and application/problem+json", () => {
    const response = problem.toResponse();
    expect(response.status).toBe(400);
    expect(response.headers.get("Content-Type")).toBe("application/problem+json");
  });

  it("writes type, title, status and detail in the body", async () => {
    expect(await problem.toResponse().json()).toEqual({
      type: "urn:floodgate:problem:invalid-request", title: "Invalid Request", status: 400, detail: "bad cost",
    });
  });

  it("adds extras to the body", async () => {
    const withExtras = new HttpProblem({ type: "t", status: 400, title: "T", detail: "d", extras: { field: "rules[0].limit" } });
    expect(await withExtras.toResponse().json()).toMatchObject({ field: "rules[0].limit" });
  });

  it("never lets extras replace the standard members", async () => {
    const sneaky = new HttpProblem({ type: "t", status: 400, title: "T", detail: "d", extras: { status: 200, type: "x", title: "y", detail: "z" } });
    expect(await sneaky.toResponse().json()).toEqual({ type: "urn:floodgate:problem:t", title: "T", status: 400, detail: "d" });
  });

  it("makes a problem name a urn:floodgate:problem URN", () => {
    expect(new HttpProblem({ type: "invalid-config", status: 500, title: "T", detail: "d" }).type).toBe("urn:floodgate:problem:invalid-config");
  });

  it("takes a type URI as it is", () => {
    expect(new HttpProblem({ type: "about:blank", status: 404, title: "Not Found", detail: "d" }).type).toBe("about:blank");
    expect(new HttpProblem({ type: QUOTA_EXCEEDED, status: 429, title: "T", detail: "d" }).type).toBe(QUOTA_EXCEEDED);
  });

  it("adds the caller's headers", () => {
    const response = problem.toResponse({ "Retry-After": "5", "RateLimit": '"a";r=0;t=5' });
    expect(response.headers.get("Retry-After")).toBe("5");
    expect(response.headers.get("RateLimit")).toBe('"a";r=0;t=5');
  });

  it("keeps Content-Type application/problem+json whatever the caller passes", () => {
    expect(problem.toResponse({ "Content-Type": "text/html" }).headers.get("Content-Type")).toBe("application/problem+json");
  });
});

describe("problem constructors", () => {
  it("rateLimited answers 429 with the IANA quota-exceeded type and the violated policies", async () => {
    const response = rateLimited(["api-per-key", "per-ip"], "slow down").toResponse();
    expect(response.status).toBe(429);
    expect(await response.json()).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded", title: "Too Many Requests", status: 429, detail: "slow down",
      "violated-policies": ["api-per-key", "per-ip"],
    });
  });

  it("invalidConfig answers 500 with the detail", async () => {
    const body = await invalidConfig("rules[0].limit: expected a positive integer").toResponse().json();
    expect(body).toMatchObject({ type: "urn:floodgate:problem:invalid-config", status: 500, detail: "rules[0].limit: expected a positive integer" });
  });

  it("invalidRequest answers 400 with the detail", async () => {
    const body = await invalidRequest("header x-cost: expected a positive integer, got \"abc\"").toResponse().json();
    expect(body).toMatchObject({ type: "urn:floodgate:problem:invalid-request", status: 400 });
  });

  it("unauthorized answers 401 with a Bearer challenge", async () => {
    const response = unauthorized().toResponse();
    expect(response.status).toBe(401);
    expect(response.headers.get("WWW-Authenticate")).toMatch(/^Bearer /);
    expect(await response.json()).toMatchObject({ type: "about:blank", title: "Unauthorized", status: 401 });
  });

  it("notFound answers 404", async () => {
    const response = notFound().toResponse();
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ type: "about:blank", title: "Not Found", status: 404 });
  });

  it("badGateway answers 502 as about:blank with the status phrase", async () => {
    const response = badGateway().toResponse();
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ type: "about:blank", title: "Bad Gateway", status: 502 });
  });

  it("mints no type under a domain floodgate does not own", async () => {
    const problems = [rateLimited(["a"], "d"), invalidConfig("d"), invalidRequest("d"), badGateway(), unauthorized(), notFound()];
    for (const problem of problems) expect(problem.type).toMatch(/^(about:blank|urn:floodgate:problem:[a-z-]+|https:\/\/iana\.org\/assignments\/http-problem-types#.+)$/);
  });
});
