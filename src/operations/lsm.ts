// LanceDB's LSM write path (Lance's MemWAL): a write spec installed on a table sends its
// merge_insert calls to in-memory shards that are flushed into generations and compacted into the
// base table. The routes take and answer what LanceDB's remote client sends and reads, and map
// onto the local Table calls of the same names. LanceDB 0.39's local tables install a spec and then
// take merge_insert rows into the MemWAL, but cannot flush, compact, checkpoint or report on it
// (each is "not supported on this table type"), so those rows never became visible (tried here: a
// merge answered 2 rows, and no count ever showed them). Quiver therefore refuses to install a spec
// (406, saying why) and refuses merge_insert on a table that has one; reading and removing a spec
// work, and the other calls answer the engine's 406.
import type { Entry } from "../catalog/catalog.js";
import { requireTable } from "../catalog/lookup.js";
import { dataError } from "../engine/datasets.js";
import * as lsm from "../engine/lsm.js";
import type { Change } from "../engine/commits.js";
import type { Work } from "../engine/deadline.js";
import type { TableHandle } from "../engine/tables.js";
import { engineReason, errorText, LSM_UNSUPPORTED } from "../engine/messages.js";
import { invalid, unsupported } from "../errors.js";
import { CommonBody } from "../schemas/common.js";
import { GetLsmStats, SetLsmWriteSpec } from "../schemas/lsm.js";
import type { Services } from "../services.js";
import { jsonOp } from "./define.js";
import { openAt } from "./table-ref.js";
import { json } from "./types.js";

/** Run `call` on the table's latest main: a failure the engine blames on the request is a 400 naming `field`. */
async function onTable<T>(svc: Services, id: string[], field: string, call: (t: TableHandle, entry: Entry) => Promise<T>): Promise<T> {
  const entry = await requireTable(svc.catalog, id);
  const t = await openAt(svc, entry);
  try {
    return await call(t, entry);
  } catch (err) {
    // What LanceDB's local tables do not offer (0.39: LSM statistics) is the spec's 406.
    if (/not supported/i.test(errorText(err))) throw unsupported(engineReason(err));
    throw dataError(err, field, entry.objectId) ?? invalid(`${field}: ${engineReason(err)}`);
  }
}

/** A call that commits to the table, one at a time with its other writes. */
const committing = (svc: Services, work: Work | null, entry: Entry, change: Change, fn: () => Promise<void>) => svc.tables.write(entry, null, { change, byCachedHandle: false, work }, fn);

/** Keys in the remote client's spelling (snake_case), at every depth. */
function snake(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snake);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), snake(x)]));
}

export const setLsmWriteSpec = jsonOp(SetLsmWriteSpec, async ({ id, body, svc }) => {
  const { mode, column, num_buckets } = body.sharding;
  if (mode !== "unsharded" && !column) throw invalid(`sharding.column: is required for mode ${mode}`);
  if (mode === "bucket" && !num_buckets) throw invalid("sharding.num_buckets: is required for mode bucket");
  await requireTable(svc.catalog, id);
  throw unsupported(`${LSM_UNSUPPORTED}; the spec was not installed`);
});

export const unsetLsmWriteSpec = jsonOp(CommonBody, async ({ id, svc, work }) => {
  await onTable(svc, id, "id", (t, entry) => committing(svc, work, entry, "index", () => lsm.unsetWriteSpec(t)));
  return json({});
});

export const getLsmWriteSpec = jsonOp(CommonBody, async ({ id, svc }) => {
  const spec = await onTable(svc, id, "id", lsm.writeSpec);
  if (!spec) return json({ lsm_write_spec: null });
  const sharding = { mode: spec.specType, ...(spec.column ? { column: spec.column } : {}), ...(spec.numBuckets ? { num_buckets: spec.numBuckets } : {}) };
  return json({ lsm_write_spec: { sharding, maintained_indexes: spec.maintainedIndexes ?? null, writer_config_defaults: spec.writerConfigDefaults ?? {} } });
});

export const getLsmStats = jsonOp(GetLsmStats, async ({ id, body, svc }) => {
  const stats = await onTable(svc, id, "id", (t) => lsm.stats(t, body.include_generation_rows ?? false));
  return json({ lsm_stats: stats ? snake(stats) : null });
});

/** flush, compact and checkpoint: the same call shape, each committing what it moves into the table. */
const moving = (call: (t: TableHandle) => Promise<void>) =>
  jsonOp(CommonBody, async ({ id, svc, work }) => {
    await onTable(svc, id, "id", (t, entry) => committing(svc, work, entry, "maintenance", () => call(t)));
    return json({});
  });

export const flushLsm = moving(lsm.flush);
export const compactLsm = moving(lsm.compact);
export const checkpointLsm = moving(lsm.checkpoint);
