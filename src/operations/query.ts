// QueryTable, ExplainTableQueryPlan, AnalyzeTableQueryPlan (docs/contract.md; lance-namespace `QueryTableRequest`).
import { analyzeQuery, explainQuery, jsonOfIpc, runQueryJson } from "../engine/query.js";
import { topK, type QuerySpec } from "../engine/query-spec.js";
import { AnalyzeRequest, ExplainRequest, QueryRequest } from "../schemas/query.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { querySpec } from "./query-spec.js";
import { openTable } from "./table-ref.js";
import { json } from "./types.js";

const ARROW_FILE = "application/vnd.apache.arrow.file";

async function target(svc: Services, id: string[], body: { version?: number | null; branch?: string | null }) {
  const { entry, table } = await openTable(svc, id, { version: body.version, branch: body.branch });
  return { table, name: entry.objectId };
}

const JSON_ROWS = { json: "application/json", ndjson: "application/x-ndjson" } as const;

export const queryTable = jsonOp(QueryRequest, async ({ id, body, svc, rowFormat, gone, largeResult }) => {
  const spec: QuerySpec = querySpec(body);
  const { table, name } = await target(svc, id, body);
  // A top-k search answers a few rows and the engine holds little for it: only scans wait for a
  // turn, so concurrent searches still run together (and batch).
  if (!topK(spec)) await largeResult();
  if (rowFormat === "arrow") return { kind: "bytes", contentType: ARROW_FILE, chunks: await svc.searches.run(table, spec, name, gone) };
  const lines = rowFormat === "ndjson";
  // A top-k search answered as JSON batches with the Arrow ones (its answer is small enough to
  // convert whole); a scan's rows are converted as the engine hands them out.
  const chunks = topK(spec) ? jsonOfIpc(await svc.searches.run(table, spec, name, gone), lines) : await runQueryJson(table, spec, name, lines);
  return { kind: "bytes", contentType: JSON_ROWS[rowFormat], chunks };
}, { produces: ARROW_FILE });

/** Upstream answers both plan operations with a plain JSON string. */
export const explainQueryPlan = jsonOp(ExplainRequest, async ({ id, body, svc }) => {
  const spec = querySpec(body.query);
  const { table, name } = await target(svc, id, { version: body.query.version, branch: body.branch ?? body.query.branch });
  return json(await explainQuery(table, spec, name, body.verbose ?? false));
});

export const analyzeQueryPlan = jsonOp(AnalyzeRequest, async ({ id, body, svc }) => {
  const spec = querySpec(body);
  const { table, name } = await target(svc, id, body);
  return json(await analyzeQuery(table, spec, name));
});
