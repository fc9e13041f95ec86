// Request bodies decoded for an operation: a JSON object, or rows as Arrow IPC bytes or JSON rows
// (held to the JSON body limit here, decoded by the operation: large ones in the worker pool).
import { ApiError, Code, transport } from "../errors.js";
export { parseJsonBody } from "../schemas/json-body.js";
import type { JsonRowsBody } from "../engine/rows-in.js";

export type RowsKind = "arrow" | "json" | "ndjson";

/** Rows arrive as Arrow IPC (also when no type is given) or as JSON; anything else is 415. */
export function rowsBodyKind(contentType: string | undefined): RowsKind {
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type === "" || type === "application/octet-stream" || type.startsWith("application/vnd.apache.arrow.")) return "arrow";
  if (type === "application/json") return "json";
  if (type === "application/x-ndjson" || type === "application/jsonl") return "ndjson";
  throw transport.unsupportedMediaType(
    `content-type: ${JSON.stringify(type)} is not accepted here; send Arrow IPC (application/vnd.apache.arrow.stream) or JSON rows (application/json, application/x-ndjson)`,
  );
}

/** JSON rows are held to the JSON body limit (their parsed form is far larger than Arrow's); bulk loads send Arrow. */
export function jsonRowsBody(bytes: Uint8Array, ndjson: boolean, limits: { maxJsonBody: number }): JsonRowsBody {
  if (bytes.length > limits.maxJsonBody) {
    throw transport.bodyTooLarge(`JSON rows body larger than the limit of ${limits.maxJsonBody} bytes (--max-json-body); send larger loads as Arrow IPC`);
  }
  return { bytes, ndjson };
}
