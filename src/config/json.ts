/** Walks of a JSON text for what JSON.parse does not say: a member named twice in one object (it keeps the last, silently), and where a text that is not JSON goes wrong. */

/** Where the repeated member is: the keys and indices down to its object, and its name. */
export interface Repeated {
  path: (string | number)[];
  name: string;
}

/** An object or array the walk is inside: the names of its members so far (an object's), and the member being read. */
interface Frame {
  seen: Set<string> | null;
  current: string | number;
}

const SPACE = new Set([" ", "\t", "\n", "\r"]);
const END_OF_LITERAL = new Set([",", "]", "}", " ", "\t", "\n", "\r"]);

/**
 * The first member named twice in one object of `text`, in document order, or undefined. `text`
 * must be JSON that JSON.parse accepted: this walks it, it does not validate it. Names compare as
 * JSON.parse reads them (`"\u006cimit"` is `"limit"`). The walk keeps its own stack, so nesting as
 * deep as JSON.parse takes costs no call stack.
 *
 * @example
 * repeatedMember('[{"name": "a", "limit": 2, "limit": 1000}]'); // { path: [0], name: "limit" }
 */
export function repeatedMember(text: string): Repeated | undefined {
  let i = 0;
  const frames: Frame[] = [];
  const skipSpace = () => {
    while (SPACE.has(text[i]!)) i++;
  };
  const string = (): string => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  /** Starts the frame's next member: an object's is its name, up to the ":" (a name seen before is the answer). */
  const startMember = (frame: Frame): Repeated | undefined => {
    if (!frame.seen) return undefined;
    skipSpace();
    const name = string();
    if (frame.seen.has(name)) return { path: frames.slice(0, -1).map((f) => f.current), name };
    frame.seen.add(name);
    frame.current = name;
    skipSpace();
    i++;
    return undefined;
  };
  for (;;) {
    skipSpace();
    const first = text[i];
    if (first === "{" || first === "[") {
      i++;
      skipSpace();
      if (text[i] !== (first === "{" ? "}" : "]")) {
        const frame: Frame = { seen: first === "{" ? new Set() : null, current: 0 };
        frames.push(frame);
        const repeated = startMember(frame);
        if (repeated) return repeated;
        continue;
      }
      i++;
    } else if (first === '"') {
      string();
    } else {
      while (i < text.length && !END_OF_LITERAL.has(text[i]!)) i++;
    }
    // A value ended: close every object and array that ends with it, then start the next member.
    for (;;) {
      const frame = frames.at(-1);
      if (!frame) return undefined;
      skipSpace();
      if (text[i++] !== ",") {
        frames.pop();
        continue;
      }
      if (!frame.seen) frame.current = (frame.current as number) + 1;
      const repeated = startMember(frame);
      if (repeated) return repeated;
      break;
    }
  }
}

/** A path as messages name a field: `rules[0].match.path`. */
export function pathText(path: readonly (string | number)[]): string {
  return path.map((part, i) => (typeof part === "number" ? `[${part}]` : i === 0 ? part : `.${part}`)).join("");
}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const SCALAR = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null/y;

/**
 * Where `text` stops being JSON, for a message that can say where: the first token that cannot be
 * there (a bad string at its opening quote, where V8 names the character inside it; a number where
 * its valid part ends). V8 gives no position for an unexpected token (a trailing comma's `]`, a
 * comment's `/`), and the snippet it quotes instead may hold an override's API key. Undefined when `text` is JSON. A walk with its own
 * stack, as {@link repeatedMember}'s.
 *
 * @example
 * syntaxErrorAt('[{"limit": 1},]'); // 14, the "]"
 */
export function syntaxErrorAt(text: string): number | undefined {
  let i = 0;
  const closing: string[] = [];
  const skipSpace = () => {
    while (SPACE.has(text[i]!)) i++;
  };
  const token = (pattern: RegExp): boolean => {
    pattern.lastIndex = i;
    if (!pattern.test(text)) return false;
    i = pattern.lastIndex;
    return true;
  };
  /** An object's member name and its ":"; false where it is not. */
  const memberName = (): boolean => {
    skipSpace();
    if (!token(STRING)) return false;
    skipSpace();
    if (text[i] !== ":") return false;
    i++;
    return true;
  };
  for (;;) {
    skipSpace();
    const first = text[i];
    if (first === "[" || first === "{") {
      const close = first === "[" ? "]" : "}";
      i++;
      skipSpace();
      if (text[i] !== close) {
        closing.push(close);
        if (close === "}" && !memberName()) return i;
        continue;
      }
      i++;
    } else if (!token(STRING) && !token(SCALAR)) {
      return i;
    }
    // A value ended: close what ends with it, then start the next member, or end the text.
    for (;;) {
      skipSpace();
      const close = closing.at(-1);
      if (close === undefined) return i < text.length ? i : undefined;
      if (text[i] === close) {
        i++;
        closing.pop();
        continue;
      }
      if (text[i] !== ",") return i;
      i++;
      if (close === "}" && !memberName()) return i;
      break;
    }
  }
}

/**
 * The fault at `at` when it is a liberty JavaScript and JSON5 allow and JSON refuses, with where it
 * starts: a trailing comma (the comma, not the bracket after it), a comment.
 */
export function liberty(text: string, at: number): { what: string; at: number } | undefined {
  if (text[at] === "/" && (text[at + 1] === "/" || text[at + 1] === "*")) return { what: "a comment", at };
  if (text[at] !== "]" && text[at] !== "}") return undefined;
  let before = at - 1;
  while (SPACE.has(text[before]!)) before--;
  return text[before] === "," ? { what: "a trailing comma", at: before } : undefined;
}

/** The line and column (from 1) of the character at `at`, as an editor shows them. */
export function lineAndColumn(text: string, at: number): { line: number; column: number } {
  const before = text.slice(0, at);
  const lineStart = before.lastIndexOf("\n") + 1;
  return { line: before.split("\n").length, column: at - lineStart + 1 };
}
