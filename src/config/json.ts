/** Finds a member a JSON text names twice in one object, which JSON.parse would keep only the last of, silently. */

/** Where the repeated member is: the keys and indices down to its object, and its name. */
export interface Repeated {
  path: (string | number)[];
  name: string;
}

const SPACE = new Set([" ", "\t", "\n", "\r"]);
const END_OF_LITERAL = new Set([",", "]", "}", " ", "\t", "\n", "\r"]);

/**
 * The first member named twice in one object of `text`, in document order, or undefined. `text`
 * must be JSON that JSON.parse accepted: this walks it, it does not validate it. Names compare as
 * JSON.parse reads them (`"\u006cimit"` is `"limit"`).
 *
 * @example
 * repeatedMember('[{"name": "a", "limit": 2, "limit": 1000}]'); // { path: [0], name: "limit" }
 */
export function repeatedMember(text: string): Repeated | undefined {
  let i = 0;
  const skipSpace = () => {
    while (SPACE.has(text[i]!)) i++;
  };
  const string = (): string => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: (string | number)[]): Repeated | undefined => {
    skipSpace();
    const first = text[i];
    if (first === '"') {
      string();
      return undefined;
    }
    if (first !== "{" && first !== "[") {
      while (i < text.length && !END_OF_LITERAL.has(text[i]!)) i++;
      return undefined;
    }
    const object = first === "{";
    const seen = new Set<string>();
    i++;
    skipSpace();
    if (text[i] === (object ? "}" : "]")) {
      i++;
      return undefined;
    }
    for (let index = 0; ; index++) {
      skipSpace();
      let at: string | number = index;
      if (object) {
        at = string();
        if (seen.has(at)) return { path, name: at };
        seen.add(at);
        skipSpace();
        i++; // the ":"
      }
      const found = value([...path, at]);
      if (found) return found;
      skipSpace();
      if (text[i++] !== ",") return undefined;
    }
  };
  return value([]);
}
