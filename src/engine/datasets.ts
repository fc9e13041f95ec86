// Table directories (local or on an object store): creating a dataset at a catalog location, the `.svc-reserved` marker
// of declared tables, whether a directory holds Lance versions, and the one place LanceDB's data
// error texts (bad SQL, bad merge, commit conflicts) become API errors.
import { mkdir } from "node:fs/promises";
import type * as A from "apache-arrow";
import type * as lancedb from "@lancedb/lancedb";
import { lanceNameOf, resolveLocation } from "../catalog/locations.js";
import { ApiError, Code, invalid } from "../errors.js";
import { recordCommitConflict } from "../metrics.js";
import { EXPRESSION_FAULT, filterError } from "./query-errors.js";
import { engineReason, errorText, isCommitConflict } from "./messages.js";
import type { Tables } from "./tables.js";
import { isRemote } from "./storage.js";
import { joinPath, listNames, removeFile, writeIfAbsent } from "../util/store-files.js";

const MARKER = ".svc-reserved";

/** Does the table directory hold at least one committed Lance version? */
export const hasVersions = async (dir: string) => (await listNames(joinPath(dir, "_versions"))).some((n) => n.endsWith(".manifest"));

export const hasMarker = async (dir: string) => (await listNames(dir)).includes(MARKER);

/** Reserve a table directory for a declared table (on an object store the marker alone makes it). */
export async function reserve(dir: string): Promise<void> {
  if (!isRemote(dir)) await mkdir(dir, { recursive: true });
  await writeIfAbsent(joinPath(dir, MARKER), Buffer.alloc(0));
}

/** Can Quiver create a dataset at this location (a `<name>.lance` directory in the data directory)? */
export const creatable = (location: string) => lanceNameOf(location) !== null;

/**
 * Write `data` as a new dataset at `location` (mode overwrite replaces what is there, keeping
 * history); removes a declared table's marker. A dataset already there is 409 code 5.
 */
export async function createDataset(
  tables: Tables,
  location: string,
  data: A.Table,
  mode: "create" | "overwrite",
): Promise<lancedb.Table> {
  const name = lanceNameOf(location);
  if (name === null) throw invalid(`location ${JSON.stringify(location)}: Quiver can only create data in a "<name>.lance" directory`);
  let t: lancedb.Table;
  try {
    t = await tables.plain.createTable(name, data, { mode });
  } catch (err) {
    if (/already exists/.test(String((err as Error)?.message))) {
      throw new ApiError(Code.TableAlreadyExists, `a dataset already exists at location ${JSON.stringify(location)}`);
    }
    throw dataError(err, "data") ?? err;
  }
  await removeFile(joinPath(resolveLocation(tables.root, location), MARKER));
  return t;
}

const BAD_INPUT = /Invalid input|Invalid user input/;

/**
 * LanceDB's error for a write or filter as an API error (`field` names the request input at fault;
 * given the `table`, an unknown column in its SQL is 404 TableColumnNotFound); null if not one of these.
 */
export function dataError(err: unknown, field: string, table?: string): ApiError | null {
  const msg = errorText(err);
  if (isCommitConflict(err)) {
    recordCommitConflict("data");
    return new ApiError(Code.ConcurrentModification, `concurrent write conflict: ${engineReason(err)}; retry`);
  }
  const sql = table === undefined ? null : filterError(err, field, table);
  if (sql) return sql;
  if (BAD_INPUT.test(msg) || EXPRESSION_FAULT.test(msg)) return invalid(`${field}: ${engineReason(err)}`);
  return null;
}
