// LanceDB's texts for failing queries and SQL expressions (filters, predicates, computed values)
// → ApiErrors: the one place they are matched.
import { ApiError, Code, invalid, isApiError } from "../errors.js";
import { engineReason, errorText, missingTableFile } from "./messages.js";
import { pinnedVersion, type TableHandle } from "./tables.js";
import { cleanedVersion } from "./versions.js";

/**
 * An SQL expression the engine could not parse, plan or evaluate on the data (bad cast, a cast the
 * engine has no kernel for, division by zero, field access on a non-struct): the request's fault, whether found before or during execution.
 */
export const EXPRESSION_FAULT =
  /Error (parsing|tokenizing|during planning|optimizing|applying filter expression)|sql parser error|Schema error|Arrow error|LanceError\(Arrow\)|Cast error|Divide by zero|Cannot access field|(^|: )Execution error: |This feature is not implemented: Unsupported CAST/;

/** Evaluated while scanning with a filter (as opposed to computing a value). */
export const isFilterFault = (err: unknown) => /Error applying filter expression/.test(errorText(err));

// DataFusion ends the name with ". Valid fields are …", ". Did you mean '…'?" (a name close to it
// exists), ". Column names are case sensitive …" or a bare ".".
const NO_FIELD = /No field named (.+?)\.(?= |$)/;
const unquote = (s: string) => s.replace(/^"(.*)"$/, "$1");

const notFound = (what: string, name: string, table: string) =>
  new ApiError(Code.TableColumnNotFound, `${what} ${JSON.stringify(name)} not found in table ${JSON.stringify(table)}`);

/** Is this a failure of SQL the request wrote (a filter, a predicate, a value expression)? */
export const isSqlFault = (err: unknown) => {
  const msg = errorText(err);
  return NO_FIELD.test(msg) || EXPRESSION_FAULT.test(msg);
};

/**
 * A failing filter or predicate (`field` names it): an unknown column is 404 TableColumnNotFound,
 * any other expression fault 400 with the engine's reason; null if the failure is not about it.
 */
export function filterError(err: unknown, field: string, table: string): ApiError | null {
  const msg = errorText(err);
  const m = msg.match(NO_FIELD);
  if (m) return notFound(`${field}: column`, unquote(m[1]), table);
  return isSqlFault(err) ? invalid(`${field}: ${engineReason(err)}`) : null;
}

type Rule = [RegExp, (m: RegExpMatchArray, table: string) => ApiError];

const rules: Rule[] = [
  [NO_FIELD, (m, t) => notFound("column", unquote(m[1]), t)],
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
  [/INVERTED index has been created/, (_m, t) =>
    invalid(`full_text_query: table ${JSON.stringify(t)} has no full-text index; name the columns to search or create an FTS index`)],
  [/position is not found but required for phrase queries/, () =>
    invalid("full_text_query: phrase queries need an FTS index built with positions (with_position: true)")],
  [/FTS field '([^']+)' must resolve to/, (m) => invalid(`full_text_query: column ${JSON.stringify(m[1])} is not a string column`)],
  [/Cannot have both nearest and full text search/, () =>
    invalid("query: the engine cannot produce a plan for hybrid (vector plus full-text) search")],
  [/Query timeout/, () => new ApiError(Code.ServiceUnavailable, "query timed out")],
  // The k HNSW is asked for is k + offset, times refine_factor where one is given.
  [/ef must be greater than or equal to k/, () =>
    invalid("ef: on an HNSW index it must be at least k + offset, times refine_factor where one is given")],
  // `columns` of constants or column-free functions only (`version()`, `now()`, `1`): a scan reads at least one column.
  [/Scans must request at least one column/, () =>
    invalid("columns: every expression reads no column (e.g. version(), now() or a literal); a query must read at least one column of the table")],
];

/** Failures answered as 400 `<field>: <engine's reason>`; null = the field of the query's SQL expressions. */
const reasonRules: [RegExp, string | null][] = [
  [/maximum_nprobes must be/, "nprobes"],
  [/Expression is not valid/, "columns"],
  [EXPRESSION_FAULT, null],
  [/Error resolving filter expression/, "filter"],
  [/Invalid (user )?input/, "query"],
];

/**
 * A read of `t`, opened at a version the request named, failed on a file a cleanup removed after
 * the version's files were last checked (version-checks.ts): not found, as the check answers.
 */
export function cleanedVersionError(err: unknown, t: TableHandle): ApiError | null {
  const at = pinnedVersion(t);
  const file = at ? missingTableFile(err) : null;
  return at && file ? cleanedVersion(at.table, at.version, file) : null;
}

/** A read of `t` failed: its error as cleanedVersionError makes it, or as it was. */
export const orCleaned = (t: TableHandle) => (err: unknown): never => {
  throw cleanedVersionError(err, t) ?? err;
};

/**
 * Translate a LanceDB query failure of `t`; `exprField` names the request field(s) holding the SQL
 * the engine evaluates (filter, computed columns). Unknown failures are re-thrown (500 with a request id).
 */
export function translateQueryError(err: unknown, t: TableHandle, table: string, exprField: string): never {
  if (isApiError(err)) throw err;
  const cleaned = cleanedVersionError(err, t);
  if (cleaned) throw cleaned;
  const msg = errorText(err);
  for (const [re, make] of rules) {
    const m = msg.match(re);
    if (m) throw make(m, table);
  }
  const hit = reasonRules.find(([re]) => re.test(msg));
  if (!hit) throw err;
  const field = hit[1] ?? (isFilterFault(err) ? "filter" : exprField);
  throw invalid(`${field}: ${engineReason(err)}`);
}
