// Request bodies decoded for an operation: a JSON object, or rows as Arrow IPC bytes or JSON rows
// (held to the JSON body limit here, decoded by the operation: large ones in the worker pool).
import { ApiError, Code, transport } from "../errors.js";
import type { JsonRowsBody } from "../engine/rows-in.js";
import { checkJsonDepth } from "../util/json-depth.js";

export function parseJsonBody(bytes: Uint8Array, maxDepth: number): Record<string, unknown> {
  // No body, or the `{}` most reads send: nothing to parse.
  if (bytes.length === 0 || (bytes.length === 2 && bytes[0] === 0x7b && bytes[1] === 0x7d)) return {};
  checkJsonDepth(bytes, maxDepth, "body");
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"));
  } catch (e) {
    throw new ApiError(Code.InvalidInput, `body: malformed JSON (${(e as Error).message})`);
  }
  // LanceDB's client sends the literal `null` where a body has no fields.
  if (v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) throw new ApiError(Code.InvalidInput, "body: must be a JSON object");
  return v as Record<string, unknown>;
}

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
