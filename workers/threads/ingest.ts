// Pool tasks "ingest" and "ingestJson": decode, check and normalise one Arrow IPC request body, or
// read one body of JSON rows as Arrow, with the same functions the main thread uses for small
// bodies, and hand back only bytes, moved. "expressionFaults": a body's long expressions checked.
// "queryBody": a large query body parsed and validated, its vectors read into float32s.
import { Piscina } from "piscina";
import { normaliseIpc } from "../../src/engine/ipc-in.js";
import { arrow } from "../../src/engine/arrow.js";
import { jsonRowsTable, type DecodeLimits, type JsonRowsBody, type RowsTarget } from "../../src/engine/rows-in.js";
import { ApiError } from "../../src/errors.js";
import { expressionFault, type ExpressionLimits } from "../../src/schemas/expression.js";
import { readQueryBody, refusalOf, type QueryBodyRead, type Refusal } from "../../src/schemas/query-body.js";
import { ownBuffer } from "../../src/util/own-buffer.js";

/** A request body, the most bytes it may decode to (--max-decoded-body) and one value may hold (--max-value-bytes). */
export interface IngestTask extends DecodeLimits {
  body: Uint8Array;
}

/** Normalised IPC bytes, or the client error for a bad body. */
export type IngestReply = Uint8Array | Refusal;

/** A bad body is data for its client error, not a worker failure; anything else is a bug and rejects (500). */
function failed(err: unknown): Refusal {
  if (err instanceof ApiError) return refusalOf(err);
  throw err;
}

export function ingest({ body, ...limits }: IngestTask): IngestReply {
  try {
    const { table, stream } = normaliseIpc(body, limits);
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
}

export function ingestJson({ body, to }: JsonIngestTask): IngestReply {
  try {
    const table = jsonRowsTable(body, { ...to, schema: to.schema && arrow.tableFromIPC(to.schema).schema });
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

export interface QueryBodyTask {
  bytes: Uint8Array;
  maxJsonDepth: number;
  limits: ExpressionLimits;
}

export function queryBody({ bytes, maxJsonDepth, limits }: QueryBodyTask): QueryBodyRead | Refusal {
  try {
    return readQueryBody(bytes, maxJsonDepth, limits);
  } catch (err) {
    return failed(err);
  }
}
