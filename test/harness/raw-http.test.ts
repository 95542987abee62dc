// Requests as raw HTTP clients (curl, sockets) send them, bytes the Fetch API's own clients would tidy away included.
import { connect } from "node:net";
import { expect, it } from "vitest";
import { useClusterFixture } from "./fixture";

const harness = useClusterFixture();

/** Sends one GET over a fresh socket with `headers` written as given, and answers its status (the socket is closed once it is read). */
function rawGet(url: URL, path: string, headers: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write([`GET ${path} HTTP/1.1`, `Host: ${url.host}`, "Connection: close", ...headers, "", ""].join("\r\n"));
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
