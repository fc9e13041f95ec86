// Request bodies decoded for an operation: a JSON object, or rows as Arrow IPC bytes (decoded by
// the operation, often in the worker pool) or as JSON rows (parsed here, on the event loop, so held
// to the JSON body limit).
import { ApiError, Code, transport } from "../errors.js";
import { parseJsonRows, type JsonRows } from "../engine/rows-in.js";

const OPEN = [0x5b, 0x7b]; // [ {
const CLOSE = [0x5d, 0x7d]; // ] }
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether the body has no more than `maxDepth` `[` and `{` bytes in all (inside strings too), so
 * that it cannot nest deeper: found by the native byte search, about a third of a query body's
 * parsing time (2.5 KB, a 128-dimension vector) saved over the scan below.
 */
function fewOpenings(bytes: Uint8Array, maxDepth: number): boolean {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let n = 0;
  for (const open of OPEN) {
    for (let i = buf.indexOf(open); i >= 0; i = buf.indexOf(open, i + 1)) if (++n > maxDepth) return false;
  }
  return true;
}

/**
 * 400 past `maxDepth` nested arrays and objects, found by a scan of the bytes before parsing:
 * what reads a parsed body (schema inference, Arrow building, validation) recurses over it, and a
 * struct row thousands deep overflowed the stack (a 500).
 */
function checkJsonDepth(bytes: Uint8Array, maxDepth: number, what: string): void {
  if (fewOpenings(bytes, maxDepth)) return;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN[0] || b === OPEN[1]) {
      if (++depth > maxDepth) throw new ApiError(Code.InvalidInput, `${what}: nested more than ${maxDepth} arrays or objects deep, the limit (--max-json-depth)`);
    } else if (b === CLOSE[0] || b === CLOSE[1]) depth--;
  }
}

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

/** JSON rows are parsed on the event loop, so they are held to the JSON body limit; bulk loads send Arrow. */
export function jsonRowsBody(bytes: Uint8Array, ndjson: boolean, limits: { maxJsonBody: number; maxJsonDepth: number }): JsonRows {
  if (bytes.length > limits.maxJsonBody) {
    throw transport.bodyTooLarge(`JSON rows body larger than the limit of ${limits.maxJsonBody} bytes (--max-json-body); send larger loads as Arrow IPC`);
  }
  checkJsonDepth(bytes, limits.maxJsonDepth, "rows");
  return parseJsonRows(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"), ndjson);
}
