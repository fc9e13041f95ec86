// LanceDB's side of materialized views: query views are LanceDB's own (`createMaterializedView`,
// refreshed incrementally by it); udtf and chunker views are tables Quiver writes.
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { lanceNameOf } from "../catalog/locations.js";
import { invalid } from "../errors.js";
import { dataError } from "./datasets.js";
import { engineReason, errorText } from "./messages.js";
import type { Tables } from "./tables.js";

/** What a query view selects from its source (src/compute/views.ts, ViewQuery). */
export interface ViewQuery {
  /** [output name, SQL expression] pairs; null for every column. */
  columns: [string, string][] | null;
  filter: string | null;
  limit: number | null;
}

/** The select of a view query, as LanceDB takes it (output name → SQL expression). */
export const selectOf = (form: ViewQuery) => (form.columns ? new Map(form.columns) : null);

/** The schema a query view over `source` would have (its rows' columns), checking the form's SQL. */
export async function queryViewSchema(source: lancedb.Table, form: ViewQuery, sourceName: string): Promise<A.Schema> {
  const q = source.query();
  const select = selectOf(form);
  if (select) q.select(select);
  if (form.filter !== null) q.where(form.filter);
  try {
    return (await q.outputSchema()) as unknown as A.Schema;
  } catch (err) {
    throw dataError(err, form.filter !== null ? "source_query.filter or source_query.columns" : "source_query.columns", sourceName) ?? invalid(`source_query: ${engineReason(err)}`);
  }
}

/** LanceDB's name for a table at `location` on the data directory's plain connection. */
function nameAt(location: string, what: string): string {
  const name = lanceNameOf(location);
  if (name === null) throw invalid(`${what}: the table lives at ${JSON.stringify(location)}, which LanceDB's views cannot reference; query views need a table Quiver created`);
  return name;
}

/** Create a query view at `viewLocation` over the table at `sourceLocation`. */
export async function createQueryView(tables: Tables, viewLocation: string, sourceLocation: string, form: ViewQuery): Promise<lancedb.Table> {
  const select = form.columns ?? undefined;
  try {
    const mv = await tables.plain.createMaterializedView(nameAt(viewLocation, "id"), nameAt(sourceLocation, "source_query.table"), {
      ...(select ? { select } : {}),
      ...(form.filter !== null ? { where: form.filter } : {}),
      ...(form.limit !== null ? { limit: form.limit } : {}),
    });
    return mv.table();
  } catch (err) {
    const msg = errorText(err);
    if (/require stable row ids/.test(msg)) {
      throw invalid("source_query.table: query views need a source table with stable row ids: tables created through Quiver have them; a table created elsewhere needs LanceDB's new_table_enable_stable_row_ids storage option when it is created");
    }
    if (/Aggregate|aggregat/i.test(msg)) throw invalid(`source_query.columns: query views cannot aggregate (${engineReason(err)}); use a udtf view`);
    throw dataError(err, "source_query", "") ?? err;
  }
}

/** Create an empty udtf or chunker view table at `location` with `schema`. */
export const createViewTable = (tables: Tables, location: string, schema: A.Schema) =>
  tables.plain.createEmptyTable(nameAt(location, "id"), schema as never, { mode: "create" });
