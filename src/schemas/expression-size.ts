// How large a value an expression can build in one row, bounded before the engine runs it. The
// engine allocates what a function asks for at once, and a failed allocation aborts the whole
// process: a read key's `array_length(array_repeat(id, 300000000)) > 0` ended the server in
// 100 ms, and the engine has no memory pool that a single allocation respects. So every value an
// expression builds is sized here from its text, as
//
//   (elements made from literals) + (copies of each column's value)
//
// where an element is an array item or a character. Size-building functions (array_repeat,
// repeat, lpad, rpad, array_resize, range, generate_series) must be given integer literals for the
// sizes they build, so the product through any nesting is known; functions that can grow their
// input by a factor (encode, replace, regexp_replace, regexp_match, concat_ws, array_to_string,
// array_replace*) scale it. A value past `maxExpressionArray` elements, or holding one column's
// value more than `maxExpressionCopies` times, is refused (docs/security.md, "Expression memory").
// Comparisons and functions that answer a number or a boolean build nothing that outlives them,
// so a long IN list or a long pattern costs nothing here.
//
// Work, not memory: levenshtein compares every character of one argument with every character of
// the other, |a|·|b| steps a row (a read key's levenshtein(rpad(s,1024,'x'), rpad(s,1024,'y')) ran
// 20,000 rows for minutes). Its work is priced as a value of that product would be: two literal
// sizes multiply to elements (at most --max-expression-array), a literal size times a column
// counts as that many copies of it (at most --max-expression-copies), and two columns are refused.
// Regular expressions run in time linear in the text once compiled, and strpos, contains and LIKE
// scan; the query deadline bounds the rest.
//
// The tokenizer follows the engine's (Lance's SQL dialect): '…' and "…" with doubled quotes and no
// backslash escapes, `…` identifiers, -- line comments, /* */ block comments that do not nest.
// Text the engine could read differently is refused rather than guessed at.

/** The two bounds, from the configuration. */
export interface SizeLimits {
  /** Elements (array items or characters) one value may hold, made from literals. */
  maxExpressionArray: number;
  /** Times one value may hold one column's value. */
  maxExpressionCopies: number;
}

/** What a value can hold per row: elements made from literals, and copies of each column's value. */
interface Size {
  elements: number;
  copies: ReadonlyMap<string, number>;
}

type Token =
  | { t: "word"; text: string; quoted: boolean }
  | { t: "string"; length: number; text: string }
  | { t: "number"; text: string }
  | { t: "op"; text: string }
  | { t: "open" | "close"; text: string }
  | { t: "comma" };

type Item =
  | Token
  | { t: "group"; open: string; args: Item[][] }
  | { t: "call"; name: string; args: Item[][] };

class Refused extends Error {}
const refuse = (why: string): never => {
  throw new Refused(why);
};

// Sticky: matched at a position without slicing the text.
const IDENTIFIER = /[\p{Alphabetic}_#@][\p{Alphabetic}0-9_$#@]*/uy;
const NUMBER = /0[xX][0-9a-fA-F]*|\d*\.?\d*(?:[eE][+-]?\d+)?/y;
const OPERATOR_CHARS = "+-*/%=<>!|&^~:.?";
// Operators of more than one character, longest first (sqlparser's tokens).
const OPERATORS = ["!~~*", "->>", "#>>", "!~*", "!~~", "~~*", "||", "::", "<=", ">=", "<>", "!=", "==", "!~", "~*", "~~", "@>", "<@", "&&", "->", "#>", "<<", ">>", "@@"];
const CLOSER: Record<string, string> = { "(": ")", "[": "]", "{": "}" };

/** The end of a quoted run starting at `i` (its quote doubled inside is an escaped quote). */
function quoted(text: string, i: number): number {
  const q = text[i];
  let j = i + 1;
  for (;;) {
    const k = text.indexOf(q, j);
    if (k < 0) return text.length;
    if (text[k + 1] !== q) return k + 1;
    j = k + 2;
  }
}

/** Whether an identifier starts at `i` ('@' and '#' may start one, or an operator such as @>). */
function startsIdentifier(text: string, i: number): boolean {
  IDENTIFIER.lastIndex = i;
  if (!IDENTIFIER.test(text)) return false;
  const c = text[i];
  return !((c === "@" || c === "#") && OPERATORS.some((o) => o[0] === c && text.startsWith(o, i)));
}

function tokenize(text: string): Token[] {
  const out: Token[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i];
    if (c === " " || c === "\n" || c === "\t" || c === "\r") i++;
    else if (c === "-" && text[i + 1] === "-") {
      const e = text.indexOf("\n", i);
      i = e < 0 ? n : e + 1;
    } else if (c === "/" && text[i + 1] === "*") {
      const e = text.indexOf("*/", i + 2);
      const body = text.slice(i + 2, e < 0 ? n : e);
      // Whether block comments nest differs between SQL dialects and versions: refuse the case where it matters.
      if (body.includes("/*")) refuse("a block comment inside a block comment");
      i = e < 0 ? n : e + 2;
    } else if (c === "'" || c === '"') {
      // An E'…' string reads backslash escapes in some versions of the engine's parser: refuse the case where that matters.
      const prev = out[out.length - 1];
      const e = quoted(text, i);
      const inner = text.slice(i + 1, e - 1);
      if (c === "'" && prev?.t === "word" && !prev.quoted && /^e$/i.test(prev.text) && i > 0 && text[i - 1].toLowerCase() === "e" && inner.includes("\\")) {
        refuse("a backslash in an E'…' string");
      }
      out.push(c === "'" ? { t: "string", length: inner.length, text: inner } : { t: "word", text: inner, quoted: true });
      i = e;
    } else if (c === "`") {
      const e = quoted(text, i);
      out.push({ t: "word", text: text.slice(i + 1, e - 1), quoted: true });
      i = e;
    } else if (c === "$") {
      refuse("$ (placeholders and dollar-quoted strings are not supported)");
    } else if ((c >= "0" && c <= "9") || (c === "." && text[i + 1] >= "0" && text[i + 1] <= "9")) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text)![0];
      out.push({ t: "number", text: m });
      i += Math.max(1, m.length);
    } else if (startsIdentifier(text, i)) {
      IDENTIFIER.lastIndex = i;
      const m = IDENTIFIER.exec(text)![0];
      out.push({ t: "word", text: m, quoted: false });
      i += m.length;
    } else if (c === "(" || c === "[" || c === "{") {
      out.push({ t: "open", text: c });
      i++;
    } else if (c === ")" || c === "]" || c === "}") {
      out.push({ t: "close", text: c });
      i++;
    } else if (c === ",") {
      out.push({ t: "comma" });
      i++;
    } else if (OPERATOR_CHARS.includes(c) || c === "@" || c === "#") {
      const op = OPERATORS.find((o) => text.startsWith(o, i)) ?? c;
      out.push({ t: "op", text: op });
      i += op.length;
    } else i++;
  }
  return out;
}

/** Tokens into items: brackets become groups, a name before `(` a call; each group's arguments split at commas. */
function parse(tokens: Token[]): Item[] {
  let at = 0;
  function sequence(closer: string | null): Item[][] {
    const args: Item[][] = [[]];
    while (at < tokens.length) {
      const tok = tokens[at++];
      if (tok.t === "close") {
        if (tok.text === closer) return args;
        continue; // an unbalanced bracket: the engine refuses the text; nothing here to size
      }
      if (tok.t === "comma") {
        args.push([]);
        continue;
      }
      const cur = args[args.length - 1];
      if (tok.t === "open") {
        const inner = sequence(CLOSER[tok.text]);
        const prev = cur[cur.length - 1];
        if (tok.text === "(" && prev?.t === "word" && (prev.quoted || !SYNTAX_WORDS.has(prev.text.toLowerCase()))) cur[cur.length - 1] = { t: "call", name: prev.text.toLowerCase(), args: inner };
        else cur.push({ t: "group", open: tok.text, args: inner });
      } else cur.push(tok);
    }
    return args;
  }
  return sequence(null).flat();
}

// Shared by every size without column copies; never changed.
const NO_COPIES: ReadonlyMap<string, number> = new Map();
const ZERO: Size = { elements: 0, copies: NO_COPIES };
const literalSize = (elements: number): Size => ({ elements, copies: NO_COPIES });

function add(...sizes: Size[]): Size {
  let copies = NO_COPIES;
  let elements = 0;
  for (const s of sizes) {
    elements += s.elements;
    if (s.copies.size === 0) continue;
    const into = copies === NO_COPIES ? (copies = new Map()) as Map<string, number> : (copies as Map<string, number>);
    for (const [k, v] of s.copies) into.set(k, (into.get(k) ?? 0) + v);
  }
  return { elements, copies };
}

function scale(s: Size, k: number): Size {
  if (s.copies.size === 0) return literalSize(s.elements * k);
  const copies = new Map<string, number>();
  for (const [c, v] of s.copies) copies.set(c, v * k);
  return { elements: s.elements * k, copies };
}

/** A value made of one value for each part of another: bounded only if one of the two is made of literals alone. */
function product(a: Size, b: Size, what: string): Size {
  if (b.copies.size === 0) return scale(a, b.elements);
  if (a.copies.size === 0) return scale(b, a.elements);
  return refuse(`${what} grows with the product of two stored values; give it a literal`);
}

// Words that are syntax, not columns.
const NOT_COLUMNS = new Set(["null", "true", "false", "date", "time", "timestamp", "interval", "case", "when", "then", "else", "end", "distinct", "from", "for", "placing", "both", "leading", "trailing", "at", "zone", "escape", "unknown", "array", "struct", "as"]);
// Keywords that a bracket may follow without making a call.
const SYNTAX_WORDS = new Set(["and", "or", "not", "is", "like", "ilike", "similar", "between", "in", "exists", "any", "all", "some", "case", "when", "then", "else", "end", "as", "from", "for", "placing", "at", "zone", "escape", "interval", "null", "true", "false", "distinct", "array"]);
// Keywords of a CASE: its value is one of its branches.
const BRANCH_WORDS = new Set(["case", "when", "then", "else", "end"]);
// Keywords whose expression answers a boolean.
const BOOLEAN_WORDS = new Set(["and", "or", "not", "is", "like", "ilike", "similar", "between", "in", "exists", "any", "all", "some"]);
// Operators that answer a boolean (anything else: arithmetic, sized as its operands together).
const BOOLEAN_OPS = new Set(["=", "==", "<", ">", "<=", ">=", "<>", "!=", "~", "!~", "~*", "!~*", "~~", "!~~", "~~*", "!~~*", "@>", "<@", "&&"]);
// Functions that answer a number, a boolean or a small fixed-size value, whatever their arguments.
const FIXED = new Set([
  "length", "char_length", "character_length", "octet_length", "bit_length", "array_length", "list_length", "cardinality",
  "array_ndims", "list_ndims", "array_dims", "list_dims", "strpos", "instr", "position", "ascii", "starts_with",
  "ends_with", "contains", "array_has", "list_has", "array_contains", "list_contains", "array_has_all", "list_has_all",
  "array_has_any", "list_has_any", "arrays_overlap", "array_position", "list_position", "array_indexof", "list_indexof",
  "array_empty", "list_empty", "empty", "find_in_set", "regexp_like", "regexp_count", "regexp_instr", "md5", "sha224", "sha256",
  "sha384", "sha512", "digest", "to_hex", "uuid", "array_distance", "list_distance", "contains_tokens", "json_array_length",
  "json_exists", "json_array_contains",
]);

const isWord = (x: Item | undefined, w: string) => x?.t === "word" && !x.quoted && x.text.toLowerCase() === w;
const isOp = (x: Item | undefined, o: string) => x?.t === "op" && x.text === o;

/** An argument that is an integer literal (with an optional sign), or null. */
function integer(arg: Item[] | undefined): number | null {
  if (!arg) return null;
  let sign = 1;
  let i = 0;
  if (arg.length === 2 && (isOp(arg[0], "-") || isOp(arg[0], "+"))) {
    sign = isOp(arg[0], "-") ? -1 : 1;
    i = 1;
  }
  const tok = arg[i];
  if (arg.length !== i + 1 || tok.t !== "number" || !/^\d+$/.test(tok.text)) return null;
  return sign * Number(tok.text);
}

/** A string literal argument's text, or null. */
function literal(arg: Item[] | undefined): string | null {
  return arg?.length === 1 && arg[0].t === "string" ? arg[0].text : null;
}

function countOf(name: string, arg: Item[] | undefined): number {
  const n = integer(arg);
  if (n === null) refuse(`the size given to ${name} must be an integer literal, so that what it builds is known before it runs`);
  return Math.max(0, n!);
}

/** Elements range (end excluded) or generate_series (end included) makes from its literal bounds. */
function seriesLength(name: string, args: Item[][]): number {
  const ns = args.map(integer);
  if (ns.length === 0 || ns.length > 3 || ns.some((n) => n === null)) refuse(`${name} needs integer literal bounds, so that what it builds is known before it runs`);
  const [a, b, step] = ns.length === 1 ? [0, ns[0]!, 1] : [ns[0]!, ns[1]!, ns[2] ?? 1];
  if (step === 0 || Math.sign(b - a) * Math.sign(step) < 0) return 0;
  const span = Math.abs(b - a) / Math.abs(step);
  return name === "range" ? Math.ceil(span) : Math.floor(span) + 1;
}

const one = literalSize(1);

/** How a size past a bound is said: of a value built, or of a function's work (steps a row). */
const BUILT = {
  elements: (n: number) => `builds up to ${n} elements (array items or characters)`,
  copies: (column: string, n: number) => `holds column ${column} up to ${n} times in one value`,
};
const WORK = {
  elements: (n: number) => `compares each character of one argument with each of the other: ${n} steps`,
  copies: (column: string, n: number) => `compares each character of column ${column} with up to ${n} others in one row`,
};

/** The size of each part of an expression, checking every value it builds against `limits`. */
function sizer(limits: SizeLimits) {
  /** `s`, after checking it against both bounds as a value that `what` builds (or, `as` WORK, as its work). */
  function value(s: Size, what: string, as = BUILT): Size {
    if (s.elements > limits.maxExpressionArray) {
      refuse(`${what} ${as.elements(s.elements)} in one row, past the limit of ${limits.maxExpressionArray} (--max-expression-array)`);
    }
    for (const [column, n] of s.copies) {
      if (n > limits.maxExpressionCopies) {
        refuse(`${what} ${as.copies(JSON.stringify(column), n)}, past the limit of ${limits.maxExpressionCopies} (--max-expression-copies)`);
      }
    }
    return s;
  }

  /** One operand: a column, a literal, a bracketed group or a call. */
  function operand(x: Item, prev: Item | undefined): Size {
    // A type after `::`, a field after `.`: not values of their own.
    const typeOrField = isOp(prev, "::") || isOp(prev, ".");
    if (x.t === "word") {
      if (typeOrField || (!x.quoted && NOT_COLUMNS.has(x.text.toLowerCase()))) return ZERO;
      // "…" is a column in a filter and a string in a projection: counted as both.
      return { elements: x.quoted ? x.text.length : 0, copies: new Map([[x.text, 1]]) };
    }
    if (x.t === "string") return literalSize(x.length);
    if (x.t === "number") return one;
    if (x.t === "group") {
      const parts = x.args.map(sequence);
      // A subscript picks a part of the value before it.
      const subscript = x.open === "[" && prev !== undefined && prev.t !== "op" && !isWord(prev, "array");
      if (typeOrField || subscript) return ZERO;
      return x.open === "(" ? add(...parts) : value(add(...parts), "an array literal");
    }
    if (x.t === "call") {
      const s = call(x.name, x.args);
      return typeOrField ? ZERO : s;
    }
    return ZERO;
  }

  /**
   * The size of a sequence of items. Boolean operators split it into runs (a concatenation with
   * `||` binds tighter than any of them); a run with `||` is a value built. A comparison answers
   * a boolean, so a sequence with one is nothing, unless it is a CASE (which answers a branch).
   */
  function sequence(items: Item[]): Size {
    // Most arguments are one column, literal or call.
    if (items.length === 1) return operand(items[0], undefined);
    const runs: Size[] = [];
    let run: Size[] = [];
    let concat = false;
    let boolean = false;
    let conditional = false;
    const endRun = () => {
      const total = add(...run);
      runs.push(concat ? value(total, "||") : total);
      run = [];
      concat = false;
    };
    for (let i = 0; i < items.length; i++) {
      const x = items[i];
      if (x.t === "op") {
        if (x.text === "||") concat = true;
        else if (BOOLEAN_OPS.has(x.text)) {
          boolean = true;
          endRun();
        }
        continue;
      }
      if (x.t === "word" && !x.quoted) {
        const w = x.text.toLowerCase();
        if (BOOLEAN_WORDS.has(w) || BRANCH_WORDS.has(w)) {
          if (BOOLEAN_WORDS.has(w)) boolean = true;
          else conditional = true;
          endRun();
          continue;
        }
        // After AS (in CAST) the rest names a type.
        if (w === "as") break;
      }
      run.push(operand(x, items[i - 1]));
    }
    endRun();
    return boolean && !conditional ? ZERO : add(...runs);
  }

  function call(name: string, args: Item[][]): Size {
    const sizes = args.map(sequence);
    const size = (i: number) => sizes[i] ?? ZERO;
    const built = (s: Size) => value(s, `${name}(…)`);
    switch (name) {
      case "array_repeat":
      case "list_repeat":
      case "repeat":
        return built(scale(size(0), countOf(name, args[1])));
      case "lpad":
      case "rpad":
        // The answer has exactly the given number of characters, whatever the string and the fill.
        return built(literalSize(countOf(name, args[1])));
      case "array_resize":
      case "list_resize":
        return built(add(size(0), scale(args[2] ? size(2) : one, countOf(name, args[1]))));
      case "range":
      case "generate_series":
        return built(literalSize(seriesLength(name, args)));
      case "encode":
        // Hex doubles the bytes; base64 makes four characters of three.
        return built(scale(size(0), 2));
      case "replace": {
        const [from, to] = [literal(args[1]), literal(args[2])];
        // A non-empty literal replaced by a literal grows the string by at most their ratio; an
        // empty pattern matches between every two characters.
        if (from !== null && from.length > 0 && to !== null) return built(scale(size(0), Math.max(1, Math.ceil(to.length / from.length))));
        return built(product(add(size(0), one), add(size(2), one), name));
      }
      case "regexp_replace":
        // Each match (at most one per character, and one at the end) becomes the replacement,
        // whose group references copy no more than the match.
        return built(product(add(size(0), one), add(size(2), one), name));
      case "regexp_match": {
        // One string per group of the pattern, each at most the whole string.
        const pattern = literal(args[1]);
        const groups = pattern !== null ? literalSize(pattern.split("(").length) : add(size(1), one);
        return built(product(size(0), groups, name));
      }
      case "concat_ws":
        return built(add(...sizes.slice(1), scale(size(0), Math.max(0, args.length - 2))));
      case "array_to_string":
      case "list_to_string":
      case "array_join":
      case "list_join":
        return built(product(size(0), add(size(1), size(2), one), name));
      case "array_replace":
      case "list_replace":
      case "array_replace_n":
      case "list_replace_n":
      case "array_replace_all":
      case "list_replace_all":
        return built(product(size(0), add(size(2), one), name));
      case "arrow_cast":
        return size(0);
      case "levenshtein":
        value(product(size(0), size(1), `${name}(…)`), `${name}(…)`, WORK);
        return ZERO;
      default:
        return FIXED.has(name) ? ZERO : built(add(...sizes));
    }
  }

  return { sequence, value };
}

/** Why the expression could build too large a value (naming the limit), or null. */
export function expressionSizeFault(text: string, limits: SizeLimits): string | null {
  // Without brackets or concatenation nothing is built, and no literal is longer than the text.
  if (text.length <= limits.maxExpressionArray && !/[([{|$]/.test(text)) return null;
  try {
    const { sequence, value } = sizer(limits);
    // The whole expression is a value too (a projected column is made for every row).
    value(sequence(parse(tokenize(text))), "the expression");
    return null;
  } catch (e) {
    if (e instanceof Refused) return e.message;
    throw e;
  }
}

/**
 * Elements (characters or array items) the expression's value holds when it is made of literals
 * alone, or null when it holds a stored value (or cannot be sized): a value made of literals needs
 * no look at the rows to be sized.
 */
export function literalElements(text: string, limits: SizeLimits): number | null {
  try {
    const size = sizer(limits).sequence(parse(tokenize(text)));
    return size.copies.size === 0 ? size.elements : null;
  } catch (e) {
    if (e instanceof Refused) return null;
    throw e;
  }
}
