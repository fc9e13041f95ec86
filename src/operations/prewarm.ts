// LanceDB's `prewarmIndex`: load an index into the engine's cache before the first query needs it.
import { requireTable } from "../catalog/lookup.js";
import { indexNotFound, isIndexNotFound, prewarmIndex } from "../engine/indexes.js";
import { mainOr } from "../engine/tables.js";
import { PrewarmIndex } from "../schemas/prewarm.js";
import { jsonOp } from "./define.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";

export const prewarmTableIndex = jsonOp(PrewarmIndex, async ({ id, params, body, svc }) => {
  const entry = await requireTable(svc.catalog, id);
  const table = await openAt(svc, entry, { branch: mainOr(body.branch) });
  try {
    await prewarmIndex(table, params.index_name);
  } catch (err) {
    if (isIndexNotFound(err)) throw indexNotFound(params.index_name, entry);
    throw err;
  }
  return json({});
});
