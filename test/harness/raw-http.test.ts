// Requests as raw HTTP clients (curl, sockets) send them, bytes the Fetch API's own clients would tidy away included.
import { connect } from "node:net";
import { expect, it } from "vitest";
import { useClusterFixture } from "./fixture";

const harness = useClusterFixture();

/** Sends one GET (or `method`, with `body`) over a fresh socket with `headers` written as given, and answers its status (the socket is closed once it is read). */
function rawGet(url: URL, path: string, headers: string[], method = "GET", body = ""): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      const length = body === "" ? [] : [`Content-Length: ${Buffer.byteLength(body)}`];
      socket.write([`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, "Connection: close", ...headers, ...length, "", body].join("\r\n"));
    });
    let answer = "";
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString("latin1");
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1];
      if (status === undefined) return;
      socket.destroy();
      resolve(Number(status));
    });
    socket.on("error", reject);
  });
}

it("keys a header part by its value without trailing spaces or tabs: a suffix buys no fresh quota", async () => {
  const cluster = await harness.start({ isolates: 1, rules: [{ name: "per-key", key: "header:x-api-key", limit: 2, period: "1h" }] });
  const front = cluster.fronts[0]!.url;
  const statuses: number[] = [];
  for (const value of ["K9", "K9", "K9 ", "K9\t", "K9 \t ", "K9  "]) statuses.push(await rawGet(front, "/raw/x", [`x-api-key: ${value}`]));
  expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
});

it("keys the ip part by CF-Connecting-IP's address without trailing spaces or tabs, as a header part is", async () => {
  const cluster = await harness.start({ isolates: 1, rules: [{ name: "per-ip", key: "ip", limit: 2, period: "1h" }] });
  const front = cluster.fronts[0]!.url;
  const statuses: number[] = [];
  for (const value of ["192.0.2.91", "192.0.2.91 ", "192.0.2.91\t"]) statuses.push(await rawGet(front, "/raw-ip/x", [`CF-Connecting-IP: ${value}`]));
  // Read as not an address, the last two shared #none's fresh quota instead of the address's.
  expect(statuses).toEqual([200, 200, 429]);
});

it("refuses an address in DENY_IPS with a trailing space or tab after it, as without", async () => {
  const cluster = await harness.start({ isolates: 1, rules: [], bindings: { DENY_IPS: "192.0.2.92" } });
  const front = cluster.fronts[0]!.url;
  const statuses: number[] = [];
  for (const value of ["192.0.2.92", "192.0.2.92 ", "192.0.2.92\t"]) statuses.push(await rawGet(front, "/raw-deny/x", [`CF-Connecting-IP: ${value}`]));
  expect(statuses).toEqual([403, 403, 403]);
});

it("forwards a GET's or DELETE's body whole when it drops a hop-by-hop header, as when it drops none", async () => {
  const cluster = await harness.start({ isolates: 1, rules: [{ name: "per-ip", key: "ip", limit: 100, period: "1h" }] });
  const front = cluster.fronts[0]!.url;
  const statuses: number[] = [];
  for (const [method, tag] of [["GET", "raw-get-body"], ["DELETE", "raw-delete-body"]] as const) {
    // Elasticsearch's GET /_search takes its query as a body; TE is a hop-by-hop header the copy of the headers leaves out.
    statuses.push(await rawGet(front, `/${tag}/x`, ["CF-Connecting-IP: 192.0.2.90", "TE: trailers"], method, "hello"));
  }
  expect(statuses).toEqual([200, 200]);
  const seen = async (tag: string) => (await (await fetch(`${harness.originUrl()}/__origin/log?tag=${tag}`)).json()) as { method: string; bodyBytes: number }[];
  expect(await seen("raw-get-body")).toMatchObject([{ method: "GET", bodyBytes: 5 }]);
  expect(await seen("raw-delete-body")).toMatchObject([{ method: "DELETE", bodyBytes: 5 }]);
});
