// THE route table: every path of the lance-namespace REST spec (docs/contract.md), each mapped to one
// operation with the role it needs. Routing, validation and authorisation are all read off it,
// and docs/api.md's route list is checked against it (test/readme.test.ts).
import type { Pattern } from "./http/router.js";
import type { Principal, Role } from "./auth/principal.js";
import type { RouteSpec, Scope } from "./http/route-spec.js";
import { notImplemented, publicOp, type Operation } from "./operations/define.js";
import { json } from "./operations/types.js";
import { openApiDocument } from "./http/openapi.js";
import * as admin from "./operations/admin.js";
import * as branch from "./operations/branch.js";
import * as consoleUi from "./operations/console.js";
import * as column from "./operations/column.js";
import * as data from "./operations/data.js";
import * as health from "./operations/health.js";
import * as indexes from "./operations/indexes.js";
import * as maintenance from "./operations/maintenance.js";
import * as managed from "./operations/managed-versions.js";
import { getMetrics } from "./operations/metrics.js";
import * as ns from "./operations/namespace.js";
import * as prewarm from "./operations/prewarm.js";
import * as query from "./operations/query.js";
import * as table from "./operations/table.js";
import * as tag from "./operations/tag.js";
import * as transaction from "./operations/transaction.js";
import * as lsm from "./operations/lsm.js";
import * as version from "./operations/version.js";
import * as views from "./operations/views.js";
import * as virtualColumns from "./operations/virtual-columns.js";

const r = (method: "GET" | "POST", path: string, name: string, op: Operation, role: Role, scope: Scope = "object"): Pattern<RouteSpec> => ({
  method,
  path,
  value: { op, role, scope, name },
});

/** A route any client may call; with `publicWith`, only when that flag is set (otherwise `role`). */
const pub = (method: "GET", path: string, name: string, op: Operation<Principal | null>, role: Role | "public" = "public", publicWith?: "metricsPublic"): Pattern<RouteSpec> => ({
  method,
  path,
  value: publicWith ? { op, role, scope: "none", name, publicWith } : { op, role, scope: "none", name },
});

/** The OpenAPI document, made from this table on first request. */
let document: ReturnType<typeof openApiDocument> | undefined;

export const routes: Pattern<RouteSpec>[] = [
  // Operations of the server itself
  pub("GET", "/healthz", "Health", health.healthz),
  pub("GET", "/readyz", "Readiness", health.readyz),
  r("POST", "/v1/admin/reclaim", "ReclaimOrphanDirectories", admin.reclaimOrphanDirectories, "admin", "none"),
  pub("GET", "/metrics", "GetMetrics", getMetrics, "read", "metricsPublic"),
  pub("GET", "/v1/openapi.json", "GetOpenApiDocument", publicOp(async () => json((document ??= openApiDocument(routes))))),
  pub("GET", "/console", "Console", consoleUi.consolePage),
  pub("GET", "/console/{file}", "ConsoleFile", consoleUi.consoleFile),

  // Namespaces
  r("POST", "/v1/namespace/{id}/create", "CreateNamespace", ns.createNamespace, "write"),
  r("GET", "/v1/namespace/{id}/list", "ListNamespaces", ns.listNamespaces, "read", "browse"),
  r("POST", "/v1/namespace/{id}/describe", "DescribeNamespace", ns.describeNamespace, "read", "browse"),
  r("POST", "/v1/namespace/{id}/drop", "DropNamespace", ns.dropNamespace, "write"),
  r("POST", "/v1/namespace/{id}/exists", "NamespaceExists", ns.namespaceExists, "read", "browse"),

  // Tables: lifecycle and listing
  r("GET", "/v1/namespace/{id}/table/list", "ListTables", table.listTables, "read", "browse"),
  r("GET", "/v1/table", "ListAllTables", table.listAllTables, "read", "none"),
  r("POST", "/v1/table/{id}/create", "CreateTable", table.createTable, "write"),
  r("POST", "/v1/table/{id}/declare", "DeclareTable", table.declareTable, "write"),
  r("POST", "/v1/table/{id}/register", "RegisterTable", table.registerTable, "admin"),
  r("POST", "/v1/table/{id}/describe", "DescribeTable", table.describeTable, "read"),
  r("POST", "/v1/table/{id}/exists", "TableExists", table.tableExists, "read"),
  r("POST", "/v1/table/{id}/drop", "DropTable", table.dropTable, "write"),
  r("POST", "/v1/table/{id}/deregister", "DeregisterTable", table.deregisterTable, "write"),
  r("POST", "/v1/table/{id}/rename", "RenameTable", table.renameTable, "write"),

  // Data
  r("POST", "/v1/table/{id}/insert", "InsertIntoTable", data.insertIntoTable, "write"),
  r("POST", "/v1/table/{id}/merge_insert", "MergeInsertIntoTable", data.mergeInsertIntoTable, "write"),
  r("POST", "/v1/table/{id}/update", "UpdateTable", data.updateTable, "write"),
  r("POST", "/v1/table/{id}/delete", "DeleteFromTable", data.deleteFromTable, "write"),
  r("POST", "/v1/table/{id}/count_rows", "CountTableRows", data.countTableRows, "read"),
  r("POST", "/v1/table/{id}/stats", "GetTableStats", data.getTableStats, "read"),
  r("POST", "/v1/table/{id}/optimize", "OptimizeTable", maintenance.optimizeTable, "write"),

  // Query
  r("POST", "/v1/table/{id}/query", "QueryTable", query.queryTable, "read"),
  r("POST", "/v1/table/{id}/explain_plan", "ExplainTableQueryPlan", query.explainQueryPlan, "read"),
  r("POST", "/v1/table/{id}/analyze_plan", "AnalyzeTableQueryPlan", query.analyzeQueryPlan, "read"),

  // Versions
  r("POST", "/v1/table/{id}/version/list", "ListTableVersions", version.listTableVersions, "read"),
  r("POST", "/v1/table/{id}/version/describe", "DescribeTableVersion", version.describeTableVersion, "read"),
  r("POST", "/v1/table/{id}/version/create", "CreateTableVersion", managed.createTableVersion, "write"),
  r("POST", "/v1/table/{id}/version/delete", "BatchDeleteTableVersions", managed.batchDeleteTableVersions, "write"),
  r("POST", "/v1/table/version/batch-create", "BatchCreateTableVersions", managed.batchCreateTableVersions, "write", "none"),
  r("POST", "/v1/table/batch-commit", "BatchCommitTables", managed.batchCommitTables, "write", "none"),
  r("POST", "/v1/table/{id}/restore", "RestoreTable", version.restoreTable, "write"),

  // Tags and branches
  r("POST", "/v1/table/{id}/tags/list", "ListTableTags", tag.listTableTags, "read"),
  r("POST", "/v1/table/{id}/tags/version", "GetTableTagVersion", tag.getTableTagVersion, "read"),
  r("POST", "/v1/table/{id}/tags/create", "CreateTableTag", tag.createTableTag, "write"),
  r("POST", "/v1/table/{id}/tags/update", "UpdateTableTag", tag.updateTableTag, "write"),
  r("POST", "/v1/table/{id}/tags/delete", "DeleteTableTag", tag.deleteTableTag, "write"),
  r("POST", "/v1/table/{id}/branches/list", "ListTableBranches", branch.listTableBranches, "read"),
  r("POST", "/v1/table/{id}/branches/create", "CreateTableBranch", branch.createTableBranch, "write"),
  r("POST", "/v1/table/{id}/branches/delete", "DeleteTableBranch", branch.deleteTableBranch, "write"),

  // Schema
  r("POST", "/v1/table/{id}/add_columns", "AlterTableAddColumns", column.addColumns, "write"),
  r("POST", "/v1/table/{id}/alter_columns", "AlterTableAlterColumns", column.alterColumns, "write"),
  r("POST", "/v1/table/{id}/drop_columns", "AlterTableDropColumns", column.dropColumns, "write"),
  r("POST", "/v1/table/{id}/update_field_metadata", "UpdateFieldMetadata", column.updateFieldMetadata, "write"),
  r("POST", "/v1/table/{id}/schema_metadata/update", "UpdateTableSchemaMetadata", column.updateSchemaMetadata, "write"),
  r("POST", "/v1/table/{id}/backfill_column", "AlterTableBackfillColumns", virtualColumns.backfillColumn, "write"),

  // Indexes
  r("POST", "/v1/table/{id}/create_index", "CreateTableIndex", indexes.createTableIndex, "write"),
  r("POST", "/v1/table/{id}/create_scalar_index", "CreateTableScalarIndex", indexes.createTableScalarIndex, "write"),
  r("POST", "/v1/table/{id}/index/list", "ListTableIndices", indexes.listTableIndices, "read"),
  r("POST", "/v1/table/{id}/index/{index_name}/stats", "DescribeTableIndexStats", indexes.describeTableIndexStats, "read"),
  r("POST", "/v1/table/{id}/index/{index_name}/drop", "DropTableIndex", indexes.dropTableIndex, "write"),
  r("POST", "/v1/table/{id}/index/{index_name}/prewarm", "PrewarmTableIndex", prewarm.prewarmTableIndex, "read"),
  r("POST", "/v1/table/{id}/page_cache/prewarm", "PrewarmTableData", notImplemented("prewarming data pages (LanceDB's prewarmData; its in-process engine offers it for remote tables only)"), "read"),
  r("POST", "/v1/table/{id}/clone", "CloneTable", notImplemented("cloning a table (LanceDB's cloneTable; a shallow clone shares the source's data files)"), "write"),
  // LanceDB's LSM write path (Lance's MemWAL), in its remote client's shapes.
  r("POST", "/v1/table/{id}/set_lsm_write_spec", "LanceDbSetLsmWriteSpec", lsm.setLsmWriteSpec, "write"),
  r("POST", "/v1/table/{id}/unset_lsm_write_spec", "LanceDbUnsetLsmWriteSpec", lsm.unsetLsmWriteSpec, "write"),
  r("POST", "/v1/table/{id}/get_lsm_write_spec", "LanceDbGetLsmWriteSpec", lsm.getLsmWriteSpec, "read"),
  r("POST", "/v1/table/{id}/get_lsm_stats", "LanceDbGetLsmStats", lsm.getLsmStats, "read"),
  r("POST", "/v1/table/{id}/flush_lsm", "LanceDbFlushLsm", lsm.flushLsm, "write"),
  r("POST", "/v1/table/{id}/compact_lsm", "LanceDbCompactLsm", lsm.compactLsm, "write"),
  r("POST", "/v1/table/{id}/checkpoint_lsm", "LanceDbCheckpointLsm", lsm.checkpointLsm, "write"),

  // Transactions
  r("POST", "/v1/transaction/{id}/describe", "DescribeTransaction", transaction.describeTransaction, "read", "none"),
  r("POST", "/v1/transaction/{id}/alter", "AlterTransaction", transaction.alterTransaction, "admin", "none"),
  r("POST", "/v1/jobs/list", "ListJobs", transaction.listJobs, "read", "none"),
  r("POST", "/v1/jobs/describe", "DescribeJob", transaction.describeJob, "read", "none"),
  r("POST", "/v1/jobs/cancel", "CancelJob", transaction.cancelJob, "write", "none"),

  // Materialized views
  r("POST", "/v1/materialized_view/{id}/create", "CreateMaterializedView", views.createMaterializedView, "write"),
  r("POST", "/v1/materialized_view/{id}/refresh", "RefreshMaterializedView", views.refreshMaterializedView, "write"),
];

/** Routes whose validators are compiled in idle turns right after listening, not at their first request. */
const DATA_PATH = new Set(["QueryTable", "InsertIntoTable", "MergeInsertIntoTable", "CountTableRows"]);

export const dataPathValidators = () => routes.filter((r) => DATA_PATH.has(r.value.name)).flatMap((r) => [r.value.op.validate, r.value.op.args].filter((v) => v !== undefined));
