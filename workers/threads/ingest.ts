// Pool tasks "ingest" and "ingestJson": decode, check and normalise one Arrow IPC request body, or
// read one body of JSON rows as Arrow, with the same functions the main thread uses for small
// bodies, and hand back only bytes, moved: the table as an IPC stream, or, for a write
// (`upload`), the IPC file its commit hands LanceDB with what its checks read (engine/upload.ts).
// "expressionFaults": a body's long expressions checked. "joinFiles": uploads' files as one.
// "queryBody": a large query-shaped body parsed and validated, its vectors read into float32s, moved.
import type * as A from "apache-arrow";
import { Piscina } from "piscina";
import { normaliseIpc } from "../../src/engine/ipc-in.js";
import { arrow } from "../../src/engine/arrow.js";
import { schemaFromIpc } from "../../src/engine/schema-ipc.js";
import { jsonRowsTable, type DecodeLimits, type JsonRowsBody, type RowsTarget } from "../../src/engine/rows-in.js";
import { ApiError } from "../../src/errors.js";
import { expressionFault, type ExpressionLimits } from "../../src/schemas/expression.js";
import { toMessage, uploadOf, type UploadMessage } from "../../src/engine/upload.js";
import { readQueryBody, refusalOf, type QueryAt, type QueryBodyRead, type Refusal } from "../../src/schemas/query-body.js";
import { moved } from "../../src/util/moved.js";
import { ownBuffer } from "../../src/util/own-buffer.js";

/** A request body, the most bytes it may decode to (--max-decoded-body) and one value may hold (--max-value-bytes). */
export interface IngestTask extends DecodeLimits {
  body: Uint8Array;
  /** Answer an UploadMessage rather than the table's IPC stream. */
  upload?: boolean;
}

/** Normalised IPC bytes, an upload, or the client error for a bad body. */
export type IngestReply = Uint8Array | UploadMessage | Refusal;

/** The upload of `t`, its buffers moved (each its own ArrayBuffer, written here). */
function moveUpload(t: A.Table): IngestReply {
  const m = toMessage(uploadOf(t));
  // A copy: the schema's bytes are kept for the next write of the same schema (schema-ipc.ts).
  const owned = { ...m, schema: m.schema.slice() };
  return moved(owned, [owned.file.buffer, owned.schema.buffer]);
}

/** A bad body is data for its client error, not a worker failure; anything else is a bug and rejects (500). */
function failed(err: unknown): Refusal {
  if (err instanceof ApiError) return refusalOf(err);
  throw err;
}

export function ingest({ body, upload, ...limits }: IngestTask): IngestReply {
  try {
    const { table, stream } = normaliseIpc(body, limits);
    if (upload) return moveUpload(table);
    // A stream that needed no change goes back as it is (the body, or its decompressed form): no
    // re-encode. A small decompressed stream sits in Node's buffer pool, which cannot be moved.
    return Piscina.move(ownBuffer(stream ?? arrow.tableToIPC(table, "stream"))) as Uint8Array;
  } catch (err) {
    return failed(err);
  }
}

/** JSON rows and what they are read into, the table's schema as an IPC stream of no rows. */
export interface JsonIngestTask {
  body: JsonRowsBody;
  to: Omit<RowsTarget, "schema"> & { schema: Uint8Array | null };
  upload?: boolean;
}

export function ingestJson({ body, to, upload }: JsonIngestTask): IngestReply {
  try {
    const table = jsonRowsTable(body, { ...to, schema: to.schema && schemaFromIpc(to.schema) });
    if (upload) return moveUpload(table);
    return Piscina.move(ownBuffer(arrow.tableToIPC(table, "stream"))) as Uint8Array;
  } catch (err) {
    return failed(err);
  }
}

export interface ExpressionsTask {
  texts: string[];
  limits: ExpressionLimits;
}

/** Each text's fault as an expression (src/schemas/expression.ts), or null: the check is as long as the text. */
export const expressionFaults = ({ texts, limits }: ExpressionsTask): (string | null)[] => texts.map((t) => expressionFault(t, limits));

/** Files joined into one for a shared commit, and the parts given, moved back. */
export interface JoinedFiles {
  joined: Uint8Array;
  parts: Uint8Array[];
}

/** Pool task "joinFiles": uploads' IPC files of one schema as one file (O(bytes), so never on the event loop). */
export function joinFiles(parts: Uint8Array[]): JoinedFiles {
  const tables = parts.map((p) => arrow.tableFromIPC(p));
  const joined = ownBuffer(arrow.tableToIPC(tables[0].concat(...tables.slice(1)), "file"));
  return moved({ joined, parts }, [joined.buffer, ...parts.map((p) => p.buffer)]);
}

export interface QueryBodyTask {
  bytes: Uint8Array;
  /** Where the body holds its query. */
  at: QueryAt;
  maxJsonDepth: number;
  limits: ExpressionLimits;
}

export function queryBody({ bytes, at, maxJsonDepth, limits }: QueryBodyTask): QueryBodyRead | Refusal {
  try {
    const read = readQueryBody(bytes, at, maxJsonDepth, limits);
    // The vector's floats, up to 4 bytes a number of the body, go back without a copy.
    return read.floats ? moved(read, [read.floats.buffer]) : read;
  } catch (err) {
    return failed(err);
  }
}
