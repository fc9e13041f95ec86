// LanceDB's cache-warming calls: load an index, or columns' data pages, into the engine's cache
// before the first query needs them. They read, never write.
import { requireTable } from "../catalog/lookup.js";
import { isIndexNotFound } from "../engine/indexes.js";
import { ApiError, Code } from "../errors.js";
import { PrewarmData, PrewarmIndex } from "../schemas/prewarm.js";
import { jsonOp } from "./define.js";
import { indexNotFound, mainOr } from "./indexes.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";

export const prewarmTableIndex = jsonOp(PrewarmIndex, async ({ id, params, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const table = await openAt(svc, entry, { branch: mainOr(body.branch) });
  try {
    await table.prewarmIndex(params.index_name);
  } catch (err) {
    if (isIndexNotFound(err)) throw indexNotFound(params.index_name, entry);
    throw err;
  }
  return json({});
});

export const prewarmTableData = jsonOp(PrewarmData, async ({ id, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const table = await openAt(svc, entry, { branch: mainOr(body.branch) });
  const fields = (await table.schema()).fields.map((f) => f.name);
  const unknown = (body.columns ?? []).find((c) => !fields.includes(c));
  if (unknown !== undefined) {
    throw new ApiError(Code.TableColumnNotFound, `columns: column ${JSON.stringify(unknown)} not found in table ${JSON.stringify(entry.objectId)}`);
  }
  await table.prewarmData(body.columns ?? undefined);
  return json({});
});
