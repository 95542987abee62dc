// The repository root, found by walking up to floodgate's package.json: right from the TypeScript sources and from any bundle of them.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "floodgate") return dir;
    if (dirname(dir) === dir) throw new Error(`no floodgate package.json above ${from}`);
  }
}
