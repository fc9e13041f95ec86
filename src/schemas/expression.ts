// Bounds on the SQL expressions a request hands to the engine (filters, predicates, column
// expressions, SQL UDF bodies). The engine's parser and planner recurse over the expression tree,
// and a deep enough tree overflows the native stack: the process dies with SIGSEGV, nothing logged
// (bench/expression-limits.ts measures where, shape by shape). So an expression is measured here,
// before the engine sees it, by a cheap tokenizer whose cost bounds the depth of any tree the
// expression can parse to: every operator, keyword operator, opening parenthesis and CASE branch
// counts one, since each can add one level. What an expression can build in memory is sized by
// expression-size.ts, for the expressions the engine runs.
import { invalid } from "../errors.js";
import { expressionSizeFault, type SizeLimits } from "./expression-size.js";

export interface ExpressionLimits extends SizeLimits {
  /** Characters. */
  maxExpressionLength: number;
  /** `expressionCost` units. */
  maxExpressionCost: number;
  /** Faults (or null) of long expressions already checked in the worker pool, by their text (`longTexts`). */
  checked?: ReadonlyMap<string, string | null>;
}

/** Texts this long are checked in the worker pool, never on the event loop: their check costs ~0.1 ms a kilobyte. */
export const CHECKED_AHEAD = 4096;

/**
 * The strings in a parsed JSON body at least `CHECKED_AHEAD` long: any may be an expression. Arrays
 * of numbers (vectors) are passed over, not walked.
 */
export function longTexts(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string") {
    if (v.length >= CHECKED_AHEAD) out.push(v);
  } else if (Array.isArray(v)) {
    if (typeof v[0] !== "number") for (const x of v) longTexts(x, out);
  } else if (v !== null && typeof v === "object") for (const k in v) longTexts((v as Record<string, unknown>)[k], out);
  return out;
}

// Keywords that build a node of the tree (operators, predicates, CASE branches).
const KEYWORDS = new Set(["and", "or", "not", "is", "like", "ilike", "similar", "between", "in", "case", "when", "then", "else", "exists", "any", "all", "some"]);
const OPERATOR = /[-+*/%=<>!|&^~@#:]/;

/** An upper bound on the depth of the expression's tree, in operators, keyword operators and parentheses. */
export function expressionCost(text: string): number {
  let cost = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (c === "'" || c === '"' || c === "`") {
      // A quoted literal or identifier; a doubled quote is an escaped one.
      i++;
      while (i < n && !(text[i] === c && text[i + 1] !== c)) i += text[i] === c ? 2 : 1;
      i++;
    } else if (c === "(" || c === "[") {
      cost++;
      i++;
    } else if (OPERATOR.test(c)) {
      cost++;
      i++;
      // A two-character operator (<=, <>, ||, ::, ->) is one node.
      if (i < n && OPERATOR.test(text[i]) && text[i] !== "-" && text[i] !== "+") i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const start = i;
      while (i < n && /[A-Za-z0-9_]/.test(text[i])) i++;
      if (KEYWORDS.has(text.slice(start, i).toLowerCase())) cost++;
    } else i++;
  }
  return cost;
}

/** What is wrong with an expression past its length or cost bound (naming the limit), or null. */
function shapeFault(text: string, limits: ExpressionLimits): string | null {
  if (text.length > limits.maxExpressionLength) {
    return `expression of ${text.length} characters is longer than the limit of ${limits.maxExpressionLength} (--max-expression-length)`;
  }
  const cost = expressionCost(text);
  if (cost > limits.maxExpressionCost) {
    return `expression too complex: ${cost} operators, keywords and parentheses, past the limit of ${limits.maxExpressionCost} (--max-expression-cost)`;
  }
  return null;
}

/** What is wrong with an expression for the engine past any bound (naming the limit), or null. */
export function expressionFault(text: string, limits: ExpressionLimits): string | null {
  // Sized only once its depth is known to be bounded: the sizing recurses over its brackets.
  return shapeFault(text, limits) ?? expressionSizeFault(text, limits);
}

/** 400 naming `field` and the limit, for an expression for the engine past any bound. */
export function checkExpression(field: string, text: string, limits: ExpressionLimits): void {
  const fault = expressionFault(text, limits);
  if (fault !== null) throw invalid(`${field}: ${fault}`);
}

/**
 * 400 naming `field` and the limit, for a SQL body past its length or cost bound. Such a body runs
 * in sql.js inside the compute sandbox, whose heap limit bounds what it builds, not in the engine.
 */
export function checkSqlBody(field: string, text: string, limits: ExpressionLimits): void {
  const fault = shapeFault(text, limits);
  if (fault !== null) throw invalid(`${field}: ${fault}`);
}
