/** Where the bench lives: the repository root, the scratch directory and the outputs, wherever the code runs from. */
import { join } from "node:path";
import { ROOT } from "../../test/harness/root";

export { ROOT };

/** Scratch space: bundles, generated scripts; ignored by git. */
export const WORK = join(ROOT, "bench/.work");
export const CHARTS = join(ROOT, "bench/charts");
