/** A walk of a JSON text for what JSON.parse does not say: a member named twice in one object (it keeps the last, silently), and where a text that is not JSON goes wrong. */

/** Where the repeated member is: the keys and indices down to its object, and its name. */
export interface Repeated {
  path: (string | number)[];
  name: string;
}

/** An object or array the walk is inside: what closes it, the names of its members so far (an object's), and the member being read. */
interface Frame {
  close: "]" | "}";
  seen: Set<string> | null;
  current: string | number;
}

/** What one walk of a text finds: where it stops being JSON, or, in JSON, the first member named twice in one object. */
type Walked = { errorAt: number } | { errorAt: undefined; repeated: Repeated | undefined };

const SPACE = new Set([" ", "\t", "\n", "\r"]);
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const SCALAR = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null/y;

/**
 * Reads `text` token by token, as JSON.parse does, for the two things it does not say: where a text
 * it refuses goes wrong (the first token that cannot be there: a bad string at its opening quote, a
 * number where its valid part ends), and which member a text it accepts names twice in one object
 * (it keeps the last, silently). Names compare as JSON.parse reads them (`"\u006cimit"` is
 * `"limit"`). The walk keeps its own stack, so nesting as deep as JSON.parse takes costs no call stack.
 */
function walk(text: string): Walked {
  let i = 0;
  let repeated: Repeated | undefined;
  const frames: Frame[] = [];
  const skipSpace = () => {
    while (SPACE.has(text[i]!)) i++;
  };
  const token = (pattern: RegExp): boolean => {
    pattern.lastIndex = i;
    if (!pattern.test(text)) return false;
    i = pattern.lastIndex;
    return true;
  };
  /** An object's member name and its ":"; false where it is not. The first name seen twice is kept. */
  const memberName = (frame: Frame): boolean => {
    skipSpace();
    const start = i;
    if (!token(STRING)) return false;
    const name = JSON.parse(text.slice(start, i)) as string;
    if (!repeated && frame.seen!.has(name)) repeated = { path: frames.slice(0, -1).map((f) => f.current), name };
    frame.seen!.add(name);
    frame.current = name;
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
        const frame: Frame = { close, seen: close === "}" ? new Set() : null, current: 0 };
        frames.push(frame);
        if (frame.seen && !memberName(frame)) return { errorAt: i };
        continue;
      }
      i++;
    } else if (!token(STRING) && !token(SCALAR)) {
      return { errorAt: i };
    }
    // A value ended: close what ends with it, then start the next member, or end the text.
    for (;;) {
      skipSpace();
      const frame = frames.at(-1);
      if (frame === undefined) return i < text.length ? { errorAt: i } : { errorAt: undefined, repeated };
      if (text[i] === frame.close) {
        i++;
        frames.pop();
        continue;
      }
      if (text[i] !== ",") return { errorAt: i };
      i++;
      if (!frame.seen) frame.current = (frame.current as number) + 1;
      else if (!memberName(frame)) return { errorAt: i };
      break;
    }
  }
}

/**
 * The first member named twice in one object of `text`, in document order, or undefined (as for a
 * text that is not JSON, which {@link syntaxErrorAt} reads).
 *
 * @example
 * repeatedMember('[{"name": "a", "limit": 2, "limit": 1000}]'); // { path: [0], name: "limit" }
 */
export function repeatedMember(text: string): Repeated | undefined {
  const walked = walk(text);
  return walked.errorAt === undefined ? walked.repeated : undefined;
}

/** A path as messages name a field: `rules[0].match.path`. */
export function pathText(path: readonly (string | number)[]): string {
  return path.map((part, i) => (typeof part === "number" ? `[${part}]` : i === 0 ? part : `.${part}`)).join("");
}

/**
 * Where `text` stops being JSON, for a message that can say where; undefined when it is JSON. V8
 * gives no position for an unexpected token (a trailing comma's `]`, a comment's `/`), and the
 * snippet it quotes instead may hold an override's API key.
 *
 * @example
 * syntaxErrorAt('[{"limit": 1},]'); // 14, the "]"
 */
export function syntaxErrorAt(text: string): number | undefined {
  return walk(text).errorAt;
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
