/** A bounded table that forgets the least recently used first: the isolate's fast-mode keys, and its caches of denials, new keys and onError counts. */

/** Keys tracked per isolate when FAST_MAX_KEYS is not set: a few MB of a 128 MB isolate. */
export const DEFAULT_MAX_KEYS = 20_000;

/**
 * A Map kept in recency order (a hit moves the entry to the end). Adding past `capacity` evicts
 * the least recently used entry and hands it to `onEvict`, so its pending work can be flushed.
 */
export class LruTable<V> {
  private readonly entries = new Map<string, V>();
  /** the key last used, already at the end: a hit on it moves nothing (an isolate's hot key is hit on every request) */
  private newest: string | undefined;

  constructor(
    public capacity: number,
    private readonly onEvict: (key: string, value: V) => void,
  ) {}

  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined && key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, value);
      this.newest = key;
    }
    return value;
  }

  /** The entry, without making it recent. */
  peek(key: string): V | undefined {
    return this.entries.get(key);
  }

  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    this.newest = key;
    while (this.entries.size > this.capacity) {
      const [oldest, evicted] = this.entries.entries().next().value as [string, V];
      this.delete(oldest);
      this.onEvict(oldest, evicted);
    }
  }

  delete(key: string): void {
    this.entries.delete(key);
    if (key === this.newest) this.newest = undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Entries from least to most recently used, without touching their recency. */
  values(): IterableIterator<V> {
    return this.entries.values();
  }
}
