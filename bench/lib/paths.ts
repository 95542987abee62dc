/** Where the bench lives: the repository root, the scratch directory and the outputs, wherever the code runs from. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The repository root: the nearest folder above this module whose package.json is floodgate's.
 * Found by walking up, so it is right both from the TypeScript sources (bench/lib/) and from a
 * bundle in bench/.work/.
 */
export const ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

/** Scratch space: bundles, generated scripts; ignored by git. */
export const WORK = join(ROOT, "bench/.work");
export const CHARTS = join(ROOT, "bench/charts");

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "floodgate") return dir;
    if (dirname(dir) === dir) throw new Error(`bench: no floodgate package.json above ${from}`);
  }
}
