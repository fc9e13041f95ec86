// Content negotiation for query answers: Arrow IPC unless the client's Accept header prefers rows as
// JSON (`application/json`) or as newline-delimited JSON (`application/x-ndjson`, or `application/jsonl`).
import type { RowFormat } from "../operations/types.js";

const FORMATS: Record<string, RowFormat> = {
  "application/vnd.apache.arrow.file": "arrow",
  "application/vnd.apache.arrow.stream": "arrow",
  "application/json": "json",
  "application/x-ndjson": "ndjson",
  "application/jsonl": "ndjson",
};

/** The format the Accept header ranks highest (by q, then order); Arrow when it names none of them. */
export function rowFormat(accept: string | undefined): RowFormat {
  // Every request passes here; only an Accept naming a JSON type can change the answer.
  if (!accept || !/json/i.test(accept)) return "arrow";
  let best: { format: RowFormat; q: number } | null = null;
  for (const part of accept.split(",")) {
    const [type, ...params] = part.trim().toLowerCase().split(";");
    const format = FORMATS[type.trim()];
    if (!format) continue;
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const q = qp ? Number(qp.slice(2)) : 1;
    if (q > 0 && (!best || q > best.q)) best = { format, q };
  }
  return best?.format ?? "arrow";
}
