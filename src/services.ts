// Everything an operation may use, built once at startup, bottom up: the catalog and the tables,
// the worker pool, then the job kinds (each given only what it uses) and the jobs that run them.
import { mkdirSync } from "node:fs";
import { privateDirOf, type Config } from "./config.js";
import { openCatalog, type Catalog } from "./catalog/catalog.js";
import { openManifestTable } from "./engine/manifest-table.js";
import { engineReason } from "./engine/messages.js";
import { openTables, type Tables } from "./engine/tables.js";
import { openJobs, type Jobs } from "./jobs/jobs.js";
import { indexBuildKind } from "./jobs/kinds/index-build.js";
import { createWorkerPool, type WorkerPool } from "../workers/pool.js";

export interface Services {
  config: Config;
  catalog: Catalog;
  tables: Tables;
  /** Background work (index builds) tracked as durable transactions. */
  jobs: Jobs;
  /** Worker threads for what JavaScript computes off the event loop (large uploads). */
  pool: WorkerPool;
  /** Set by the front end while it drains for a shutdown (readiness answers 503). */
  lifecycle: { draining: boolean };
  /** Release what the services hold (called after the server drained). */
  close(): Promise<void>;
}

export async function createServices(config: Config): Promise<Services> {
  const privateDir = privateDirOf(config.dataDir);
  mkdirSync(privateDir, { recursive: true, mode: 0o700 });
  const manifest = await openManifestTable(config.dataDir, privateDir);
  const catalog = await openCatalog(manifest, config.consistencyIntervalMs, config.dataDir);
  const tables = await openTables(config.dataDir, config.consistencyIntervalMs);
  const pool = createWorkerPool(config);
  const jobs = openJobs(privateDir, [indexBuildKind({ catalog, tables, limit: config.indexBuilds })], engineReason);
  return {
    config,
    catalog,
    tables,
    jobs,
    pool,
    lifecycle: { draining: false },
    async close() {
      await Promise.all([jobs.close(), pool.destroy()]);
    },
  };
}
