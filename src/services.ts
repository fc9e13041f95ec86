// Everything an operation may use, built once at startup.
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Config } from "./config.js";
import { openCatalog, type Catalog } from "./catalog/catalog.js";
import { openManifestTable } from "./engine/manifest-table.js";
import { openTables, type Tables } from "./engine/tables.js";
import { engineMessage } from "./engine/indexes.js";
import { INDEX_BUILD, indexBuildRunner } from "./jobs/index-build.js";
import { openJobs, type Jobs } from "./jobs/scheduler.js";
import { createIngestPool, type IngestPool } from "./pool.js";

export interface Services {
  config: Config;
  catalog: Catalog;
  tables: Tables;
  /** Quiver's own state inside the data directory (keys, job records, links). */
  privateDir: string;
  /** Background operations (index builds) tracked as durable transactions. */
  jobs: Jobs;
  /** Worker threads decoding large Arrow IPC request bodies. */
  pool: IngestPool;
  /** Release what the services hold (called after the server drained). */
  close(): Promise<void>;
}

export async function createServices(config: Config): Promise<Services> {
  const privateDir = path.join(config.dataDir, ".quiver");
  mkdirSync(privateDir, { recursive: true, mode: 0o700 });
  const manifest = await openManifestTable(config.dataDir, privateDir);
  const catalog = await openCatalog(manifest, config.consistencyIntervalMs, config.dataDir);
  const tables = await openTables(config.dataDir, config.consistencyIntervalMs);
  const pool = createIngestPool(config);
  const close = async () => {
    await Promise.all([svc.jobs.close(), pool.destroy()]);
  };
  const svc: Services = { config, catalog, tables, privateDir, jobs: undefined as unknown as Jobs, pool, close };
  svc.jobs = openJobs(privateDir, config.indexBuilds, { [INDEX_BUILD]: indexBuildRunner(svc) }, engineMessage);
  return svc;
}
