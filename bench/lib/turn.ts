/** A turn of Node's event loop, for parts that otherwise compute in one long synchronous or microtask-only run. */

/**
 * Resolves on the next turn of the loop (untimed: call it between measurements). The bench's SIGINT handler (Ctrl-C) runs
 * only between tasks, so a part that never yields one is stopped only once it is done, and then writes its report all the same.
 */
export const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
