/** Entry of the bench's helper processes: `child.mjs origin`, `child.mjs proxy <config>`, `child.mjs autocannon <options>`. */
import autocannon from "autocannon";
import { serveProxy, type ProxyConfig } from "../redis";
import { clientIp, type LoadOptions, type LoadResult } from "./load";
import { serveOrigin } from "./origin";

const [role, arg] = process.argv.slice(2);

async function main(): Promise<void> {
  switch (role) {
    case "origin":
      return serveOrigin();
    case "proxy":
      return serveProxy(JSON.parse(arg!) as ProxyConfig);
    case "autocannon":
      return runAutocannon(JSON.parse(arg!) as LoadOptions);
    default:
      throw new Error(`unknown role ${role}`);
  }
}

async function runAutocannon(options: LoadOptions): Promise<void> {
  const requests =
    options.ips === 0
      ? undefined
      : Array.from({ length: options.ips }, (_, n) => ({ method: "GET", path: options.path, headers: { "cf-connecting-ip": clientIp(n) } }));
  const result = await autocannon({
    url: `${options.url}${options.path}`,
    connections: options.connections,
    duration: options.seconds,
    timeout: 10,
    ...(requests ? { requests } : {}),
  });
  const cpu = process.cpuUsage();
  const out: LoadResult = {
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    generatorCpuS: (cpu.user + cpu.system) / 1e6,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
