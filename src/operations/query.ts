// QueryTable, ExplainTableQueryPlan, AnalyzeTableQueryPlan (docs/contract.md; lance-namespace `QueryTableRequest`).
import type { Principal } from "../auth/principal.js";
import type { Entry } from "../catalog/catalog.js";
import { analyzeQuery, explainQuery, jsonOfIpc, runQueryJson } from "../engine/query.js";
import { dirOf, located } from "../lifecycle/table-lifecycle.js";
import { topK, type QuerySpec } from "../engine/query-spec.js";
import { AnalyzeRequest, ExplainRequest, QueryRequest } from "../schemas/query.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { querySpec } from "./query-spec.js";
import { openTable } from "./table-ref.js";
import { boundOf, json } from "./types.js";

const ARROW_FILE = "application/vnd.apache.arrow.file";

async function target(svc: Services, id: string[], body: { version?: number | null; branch?: string | null }) {
  const { entry, table } = await openTable(svc, id, { version: body.version, branch: body.branch });
  return { entry, table, name: entry.objectId };
}

const JSON_ROWS = { json: "application/json", ndjson: "application/x-ndjson" } as const;

/** Which path answered a vector search: `serving` (the serving index) or `engine; reason=<why>`. */
export const SEARCH_PATH_HEADER = "x-quiver-search-path";

export const queryTable = jsonOp(QueryRequest, async (ctx) => {
  const { id, body, svc, rowFormat, gone, largeResult, minVersion } = ctx;
  const spec: QuerySpec = querySpec(body);
  const { entry, table, name } = await target(svc, id, body);
  // A top-k search answers a few rows and the engine holds little for it: only scans wait for a
  // turn, so concurrent searches still run together (and batch).
  if (!topK(spec)) await largeResult();
  const contentType = rowFormat === "arrow" ? ARROW_FILE : JSON_ROWS[rowFormat];
  const served = await svc.serving.search(entry, table, spec, { version: body.version, branch: body.branch, minVersion, deadline: ctx.deadline }, rowFormat);
  if ("chunks" in served) return { kind: "bytes", contentType, headers: { [SEARCH_PATH_HEADER]: "serving" }, chunks: served.chunks };
  const headers = served.reason === null ? undefined : { [SEARCH_PATH_HEADER]: `engine; reason=${served.reason}` };
  const b = boundOf(ctx);
  if (rowFormat === "arrow") return { kind: "bytes", contentType, headers, chunks: await svc.searches.run(table, spec, name, b, gone) };
  const lines = rowFormat === "ndjson";
  // A top-k search answered as JSON batches with the Arrow ones (its answer is small enough to
  // convert whole); a scan's rows are converted as the engine hands them out.
  const chunks = topK(spec) ? jsonOfIpc(await svc.searches.run(table, spec, name, b, gone), lines) : await runQueryJson(table, spec, name, lines, b);
  return { kind: "bytes", contentType, headers, chunks };
}, { produces: ARROW_FILE });

const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
const bare = (p: string) => p.replace(SCHEME, "").replace(/^\/+/, "");

/**
 * A plan names the files it reads (`LanceRead: uri=<table's directory>/data`, the object store's
 * spelling: no scheme, no leading "/"). Where describe leaves out the location (--location-role),
 * so does the plan: the table's directory reads `<table ns$t>`, and a `uri=` elsewhere (a
 * registered location spelled differently) the same, whole.
 */
function plainPlan(svc: Services, principal: Principal, entry: Entry, plan: string): string {
  if (located(svc, principal)) return plan;
  const dir = bare(dirOf(svc, entry));
  const label = `<table ${entry.objectId}>`;
  const uris = plan.replace(/uri=([^,\s\]]+)/g, (_, uri: string) => {
    const rest = bare(uri);
    return `uri=${rest.startsWith(dir) ? label + rest.slice(dir.length) : label}`;
  });
  return uris.split(dir).join(label);
}

/**
 * Upstream answers both plan operations with a plain JSON string. A vector search's plan starts
 * with the path that answers it (the serving index, or the engine and why); the engine's plan of
 * the same search follows (what runs whenever the engine answers it).
 */
export const explainQueryPlan = jsonOp(ExplainRequest, async ({ id, body, svc, principal, deadline }) => {
  const spec = querySpec(body.query);
  const at = { version: body.query.version, branch: body.branch ?? body.query.branch, deadline };
  const { entry, table, name } = await target(svc, id, at);
  const [path, plan] = await Promise.all([svc.serving.explain(entry, table, spec, at), explainQuery(table, spec, name, body.verbose ?? false)]);
  return json(plainPlan(svc, principal, entry, path === null ? plan : `${path}\n${plan}`));
});

export const analyzeQueryPlan = jsonOp(AnalyzeRequest, async (ctx) => {
  const { id, body, svc, principal } = ctx;
  const spec = querySpec(body);
  const { entry, table, name } = await target(svc, id, body);
  return json(plainPlan(svc, principal, entry, await analyzeQuery(table, spec, name, boundOf(ctx))));
});
