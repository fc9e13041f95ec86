// Schemas as Arrow IPC streams of no rows: how one crosses to a pool worker and back, and how
// LanceDB's native table answers a table's schema. For a wide table decoding is the costly part of
// a write on the event loop (2,001 columns, ~95 KB: LanceDB's `schema()` builds an empty record
// batch of every column, 30-84 ms cold and 8-30 ms warm, measured; reading the schema message
// alone 2-3 ms warm), and a table's schema is the same from one version to the next, so both
// directions keep their last answers and a read decodes only the schema message.
import { createHash } from "node:crypto";
import type * as A from "apache-arrow";
import { arrow } from "./arrow.js";
import type * as lancedb from "@lancedb/lancedb";

/** Schemas decoded lately, by their bytes' digest; a handful of tables write at once. */
const KEEP_DECODED = 32;
const encoded = new WeakMap<A.Schema, Uint8Array>();
const decoded = new Map<string, A.Schema>();

/** `schema` as an IPC stream of no rows; the same bytes for the same schema object, so they are copied to a worker, never moved. */
export function schemaToIpc(schema: A.Schema): Uint8Array {
  let bytes = encoded.get(schema);
  if (!bytes) encoded.set(schema, (bytes = arrow.tableToIPC(new arrow.Table(schema), "stream")));
  return bytes;
}

/** The schema of an IPC stream that `schemaToIpc` wrote; one object for equal bytes (callers do not change a schema). */
export function schemaFromIpc(bytes: Uint8Array): A.Schema {
  const key = createHash("sha256").update(bytes).digest("base64");
  let schema = decoded.get(key);
  if (schema) decoded.delete(key);
  else schema = arrow.RecordBatchReader.from(bytes).open().schema;
  decoded.set(key, schema);
  if (decoded.size > KEEP_DECODED) decoded.delete(decoded.keys().next().value!);
  return schema;
}

/** What of LanceDB's native table (`LocalTable.inner` in @lancedb/lancedb/dist/table.js) a schema read uses. */
interface NativeSchema {
  schema(): Promise<Buffer>;
}

/** `t`'s schema, as its `schema()` answers it, decoded as `schemaFromIpc` decodes. */
export async function readSchema(t: lancedb.Table): Promise<A.Schema> {
  const inner = (t as unknown as { inner?: Partial<NativeSchema> }).inner;
  if (typeof inner?.schema !== "function") return (await t.schema()) as unknown as A.Schema;
  return schemaFromIpc(await inner.schema());
}
