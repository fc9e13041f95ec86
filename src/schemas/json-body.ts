// A JSON request body parsed: on the event loop for most bodies, in a worker for a large query-shaped one (query-body.ts).
import { ApiError, Code } from "../errors.js";
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
