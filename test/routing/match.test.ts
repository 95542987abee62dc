// Which rules apply to a request: path, method and host matching.
import { describe, expect, it } from "vitest";
import { hostOf, matchingRules } from "../../src/routing/match";
import { rule } from "../helpers/rules";

const get = (path: string, host = "api.example.com") => ({ method: "GET", path, host });

describe("matchingRules", () => {
  it("applies a rule without constraints to every request", () => {
    const r = rule();
    expect(matchingRules([r], { method: "PATCH", path: "/anything", host: "x.test" })).toEqual([r]);
  });

  it("returns every matching rule, in the rules' order", () => {
    const all = rule({ name: "all" });
    const api = rule({ name: "api", match: { path: "/api/*" } });
    const login = rule({ name: "login", match: { path: "/login" } });
    expect(matchingRules([all, login, api], get("/api/users"))).toEqual([all, api]);
  });

  it("returns no rules when none match", () => {
    expect(matchingRules([rule({ match: { path: "/api/*" } })], get("/health"))).toEqual([]);
  });

  it("matches the path glob against the pathname as received, not decoded", () => {
    const encoded = rule({ match: { path: "/files/a%20b" } });
    const decoded = rule({ match: { path: "/files/a b" } });
    expect(matchingRules([encoded, decoded], get("/files/a%20b"))).toEqual([encoded]);
  });

  it("matches a path whose unreserved characters are percent-escaped as the path itself: /%61pi/x is /api/x to any origin", () => {
    const api = rule({ match: { path: "/api/*" } });
    expect(matchingRules([api], get("/%61pi/x"))).toEqual([api]);
    expect(matchingRules([api], get("/%61%70%69/x"))).toEqual([api]);
  });

  it("matches a path with | or [ ] escaped as the path written raw, as the URL parser passes them", () => {
    const piped = rule({ match: { path: "/a|b[1]/*" } });
    expect(matchingRules([piped], get("/a%7Cb%5B1%5D/x"))).toEqual([piped]);
    expect(matchingRules([piped], get("/a%7cb[1]/x"))).toEqual([piped]);
  });

  it("matches escapes in either case, and keeps reserved ones escaped", () => {
    const cafe = rule({ match: { path: "/caf%C3%A9/*" } });
    const slash = rule({ match: { path: "/a%2Fb" } });
    expect(matchingRules([cafe, slash], get("/caf%c3%a9/menu"))).toEqual([cafe]);
    expect(matchingRules([cafe, slash], get("/a%2fb"))).toEqual([slash]);
    expect(matchingRules([cafe, slash], get("/a/b"))).toEqual([]);
  });

  it("applies a rule to a path whose slashes are escaped, which origins that decode %2F before routing (Go's, WSGI's) route as the path itself", () => {
    const users = rule({ match: { path: "/api/users" } });
    const api = rule({ match: { path: "/api/*" } });
    expect(matchingRules([users, api], get("/api%2Fusers"))).toEqual([users, api]);
    expect(matchingRules([users, api], get("/api%2fusers"))).toEqual([users, api]);
    // Read with its slashes, a path's dot segments are resolved as such an origin resolves them.
    expect(matchingRules([users], get("/public%2F..%2Fapi%2Fusers"))).toEqual([users]);
    expect(matchingRules([users], get("/api/users%2Fx"))).toEqual([]);
  });

  it("applies a rule to a path whose slashes are written as escaped backslashes, which IIS routes as slashes", () => {
    const users = rule({ match: { path: "/api/users" } });
    expect(matchingRules([users], get("/api%5Cusers"))).toEqual([users]);
    expect(matchingRules([users], get("/api%5cusers"))).toEqual([users]);
    expect(matchingRules([users], get("/public%5C..%5Capi%5Cusers"))).toEqual([users]);
  });

  it("applies a rule to the spellings of its path that lenient origins route as it: any case, ;parameters, repeated or trailing slashes", () => {
    const login = rule({ match: { path: "/login" } });
    const api = rule({ match: { path: "/api/*/admin" } });
    // Express and ASP.NET route in any case, Tomcat and Spring drop ;parameters, nginx merges slashes, Express takes a trailing one.
    for (const path of ["/LOGIN", "/Login", "/login;jsessionid=x", "//login", "/login/", "/./login", "/LoGiN;x/"]) expect(matchingRules([login], get(path))).toEqual([login]);
    for (const path of ["/API/v1/Admin", "/api;x/v1/admin", "/api//v1//admin/", "/api/v1;x/admin"]) expect(matchingRules([api], get(path))).toEqual([api]);
    // Read so, the path is still the same route and no other.
    for (const path of ["/logins", "/log/in", "/x/login", "/login%2Fx"]) expect(matchingRules([login], get(path))).toEqual([]);
  });

  it("applies a rule whose glob fits a directory (/admin/ under /admin/*) to the spellings lenient origins route as that directory", () => {
    const admin = rule({ match: { path: "/admin/*" } });
    expect(matchingRules([admin], get("/admin/"))).toEqual([admin]);
    // Express routes /ADMIN/ as /admin/, nginx //admin/ and /admin%2F, Tomcat /admin;x/, and nginx resolves /admin/x%2F.. to /admin/.
    for (const path of ["/ADMIN/", "//admin/", "/admin%2F", "/admin;x/", "/Admin//", "/admin/x%2F..", "/admin%5C"]) expect(matchingRules([admin], get(path))).toEqual([admin]);
    // A path that is no directory stays outside, read any way: /admin is not /admin/* as written, nor /ADMIN.
    for (const path of ["/admin", "/ADMIN", "/admin;x", "/adminx/"]) expect(matchingRules([admin], get(path))).toEqual([]);
  });

  it("applies a rule whose glob lenient origins read otherwise to the path in the form it reads as: /account/login under a rule on /Account/Login", () => {
    // ASP.NET's routes are written in PascalCase and routed in any case: the all-lower spelling is the same action.
    const login = rule({ match: { path: "/Account/Login" } });
    const slash = rule({ match: { path: "/login/" } });
    for (const path of ["/Account/Login", "/ACCOUNT/LOGIN", "/account/login"]) expect(matchingRules([login], get(path))).toEqual([login]);
    for (const path of ["/login/", "/LOGIN", "/login"]) expect(matchingRules([slash], get(path))).toEqual([slash]);
  });

  it("reads a glob's ;parameters and escaped slashes as written: they say which requests the rule is for", () => {
    const sessions = rule({ match: { path: "/*;jsessionid=*" } });
    const encoded = rule({ match: { path: "/api/v4/projects/*%2F*" } });
    for (const path of ["/Products", "/caf%C3%A9", "/cart/"]) expect(matchingRules([sessions], get(path))).toEqual([]);
    expect(matchingRules([sessions], get("/cart;jsessionid=1"))).toEqual([sessions]);
    expect(matchingRules([encoded], get("/api/v4/projects/42/Issues"))).toEqual([]);
    expect(matchingRules([encoded], get("/api/v4/projects/group%2Fproject/issues"))).toEqual([encoded]);
  });

  it("matches methods regardless of the request method's case", () => {
    const post = rule({ match: { methods: ["POST"] } });
    expect(matchingRules([post], { method: "post", path: "/", host: "x.test" })).toEqual([post]);
  });

  it("skips a rule whose methods do not include the request's", () => {
    expect(matchingRules([rule({ match: { methods: ["POST", "PUT"] } })], get("/"))).toEqual([]);
  });

  it("applies a rule limiting GET to HEAD too, which origins answer with their GET handler", () => {
    const reads = rule({ match: { methods: ["GET"] } });
    const writes = rule({ match: { methods: ["POST"] } });
    expect(matchingRules([reads, writes], { method: "HEAD", path: "/", host: "x.test" })).toEqual([reads]);
  });

  it("matches the host regardless of case", () => {
    const r = rule({ match: { host: "api.example.com" } });
    expect(matchingRules([r], get("/", "API.Example.COM"))).toEqual([r]);
  });

  it("skips a rule for another host", () => {
    expect(matchingRules([rule({ match: { host: "api.example.com" } })], get("/", "www.example.com"))).toEqual([]);
  });

  it("ignores the request's port when the rule's host has none", () => {
    const r = rule({ match: { host: "api.example.com" } });
    expect(matchingRules([r], get("/", "api.example.com:8443"))).toEqual([r]);
  });

  it("requires the same port when the rule's host names one", () => {
    const r = rule({ match: { host: "localhost:8787" } });
    expect(matchingRules([r], get("/", "localhost:8787"))).toEqual([r]);
    expect(matchingRules([r], get("/", "localhost:9000"))).toEqual([]);
    expect(matchingRules([r], get("/", "localhost"))).toEqual([]);
  });

  it("matches a rule naming the scheme's default port: the URL leaves it out, hostOf writes it out", () => {
    const https = rule({ match: { host: "api.example.com:443" } });
    expect(hostOf(new URL("https://api.example.com/x"))).toBe("api.example.com:443");
    expect(hostOf(new URL("http://api.example.com/x"))).toBe("api.example.com:80");
    expect(hostOf(new URL("http://api.example.com:8080/x"))).toBe("api.example.com:8080");
    expect(matchingRules([https], get("/", hostOf(new URL("https://api.example.com/x"))))).toEqual([https]);
    expect(matchingRules([https], get("/", hostOf(new URL("http://api.example.com/x"))))).toEqual([]);
  });

  it("does not mistake an IPv6 literal's colons for a port", () => {
    const r = rule({ match: { host: "[::1]" } });
    expect(matchingRules([r], get("/", "[::1]"))).toEqual([r]);
    expect(matchingRules([r], get("/", "[::1]:8787"))).toEqual([r]);
  });

  it("does not let a trailing dot on the host dodge a rule", () => {
    const r = rule({ match: { host: "api.example.com" } });
    expect(matchingRules([r], get("/", "api.example.com."))).toEqual([r]);
    expect(matchingRules([r], get("/", "api.example.com.:443"))).toEqual([r]);
    expect(matchingRules([r], get("/", "api.example.com.."))).toEqual([r]);
  });

  it("requires path, method and host to fit together", () => {
    const r = rule({ match: { path: "/login", methods: ["POST"], host: "api.example.com" } });
    const post = (path: string, host: string) => ({ method: "POST", path, host });
    expect(matchingRules([r], post("/login", "api.example.com"))).toEqual([r]);
    expect(matchingRules([r], post("/login", "other.example.com"))).toEqual([]);
    expect(matchingRules([r], post("/logout", "api.example.com"))).toEqual([]);
    expect(matchingRules([r], get("/login"))).toEqual([]);
  });
});
