/** A binary min-heap over a plain array, by each entry's `key`: the peer index's timelines pop what comes due first. */

export interface Keyed {
  key: number;
}

export function pushHeap<T extends Keyed>(heap: T[], entry: T): void {
  let i = heap.push(entry) - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (heap[parent]!.key <= entry.key) break;
    heap[i] = heap[parent]!;
    i = parent;
  }
  heap[i] = entry;
}

/** Removes and returns the entry with the least key; undefined when empty. */
export function popHeap<T extends Keyed>(heap: T[]): T | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (top === undefined || last === undefined || heap.length === 0) return top;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    const child = left + 1 < heap.length && heap[left + 1]!.key < heap[left]!.key ? left + 1 : left;
    if (heap[child]!.key >= last.key) break;
    heap[i] = heap[child]!;
    i = child;
  }
  heap[i] = last;
  return top;
}
