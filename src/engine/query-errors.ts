// LanceDB query error texts → ApiErrors (the one place they are matched; lancedb-query.md §1–3).
import { ApiError, Code, invalid, isApiError } from "../errors.js";

/** The engine's own reason, without its call-site prefix, source paths and "Caused by" tails. */
export function engineReason(err: unknown): string {
  return String((err as Error)?.message ?? err)
    .replace(/^Failed to [^:]*: (GenericFailure, )?/, "")
    .replace(/^(lance error: )?Invalid input, /, "")
    .replace(/,? \/(usr|root|home)\/[^\s]*\.rs:\d+:\d+/g, "")
    .replace(/\s*Caused by:[\s\S]*$/, "")
    .trim();
}

/** A rule's answer: an ApiError, or null for "400 naming the field, with the engine's own reason". */
type Rule = [RegExp, (m: RegExpMatchArray, table: string) => ApiError | null];

const notFound = (what: string, name: string, table: string) =>
  new ApiError(Code.TableColumnNotFound, `${what} ${JSON.stringify(name)} not found in table ${JSON.stringify(table)}`);

const rules: Rule[] = [
  [/No field named (.+?)\. Valid fields/, (m, t) => notFound("column", m[1].replace(/^"(.*)"$/, "$1"), t)],
  [/FTS field path '([^']+)' does not exist/, (m, t) => notFound("full-text column", m[1], t)],
  [/column (\S+) does not exist in schema/, (m, t) => notFound("vector_column", m[1], t)],
  [/More than one vector columns found[^[]*(\[[^\]]*\])/, (m, t) =>
    invalid(`vector_column: table ${JSON.stringify(t)} has more than one vector column, name one of ${m[1]}`)],
  [/No vector column found to match with the query vector dimension: (\d+)/, (m, t) =>
    invalid(`vector: table ${JSON.stringify(t)} has no vector column of dimension ${m[1]}`)],
  [/query dim\((\d+)\) doesn't match the column (\S+) vector dim\((\d+)\)/, (m) =>
    invalid(`vector: has ${m[1]} dimensions, vector column ${JSON.stringify(m[2])} has ${m[3]}`)],
  [/Data type is not a vector[^,]*, but (\S+)/, (m) => invalid(`vector_column: is not a vector column (its type is ${m[1]})`)],
  [/Distance type (\w+) does not support (\w+)/, (m) => invalid(`distance_type: ${m[1]} does not support ${m[2]} vectors`)],
  [/Error parsing statement|Error resolving filter expression|Invalid user input|sql parser error/, () => null],
  [/Expression is not valid/, () => null],
  [/INVERTED index has been created/, (_m, t) =>
    invalid(`full_text_query: table ${JSON.stringify(t)} has no full-text index; name the columns to search or create an FTS index`)],
  [/position is not found but required for phrase queries/, () =>
    invalid("full_text_query: phrase queries need an FTS index built with positions (with_position: true)")],
  [/FTS field '([^']+)' must resolve to/, (m) => invalid(`full_text_query: column ${JSON.stringify(m[1])} is not a string column`)],
  [/Cannot have both nearest and full text search/, () =>
    invalid("query: the engine cannot produce a plan for hybrid (vector plus full-text) search")],
  [/maximum_nprobes must be/, () => null],
  [/Query timeout/, () => new ApiError(Code.ServiceUnavailable, "query timed out")],
];

/** Field a free-text engine error is about, to name it in the 400. */
function fieldOf(reason: string): string {
  if (/WHERE|filter/i.test(reason)) return "filter";
  if (/Expression is not valid/.test(reason)) return "columns";
  if (/nprobes/.test(reason)) return "nprobes";
  return "query";
}

/** Translate a LanceDB query failure; unknown failures are re-thrown (500 with a request id). */
export function translateQueryError(err: unknown, table: string): never {
  if (isApiError(err)) throw err;
  const msg = String((err as Error)?.message ?? err);
  for (const [re, make] of rules) {
    const m = msg.match(re);
    if (!m) continue;
    const e = make(m, table);
    if (e) throw e;
    const reason = engineReason(err);
    throw invalid(`${fieldOf(reason)}: ${reason}`);
  }
  if (/Invalid input/.test(msg)) throw invalid(`query: ${engineReason(err)}`);
  throw err;
}
