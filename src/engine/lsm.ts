// LanceDB's LSM write path (Lance's MemWAL) on an open table: its write spec, statistics, and the
// calls that move MemWAL rows into the table (src/operations/lsm.ts says what 0.39 supports).
import type { TableHandle } from "./tables.js";

/** The installed write spec, or undefined when none is. */
export const writeSpec = (t: TableHandle) => t.getLsmWriteSpec();
export const unsetWriteSpec = (t: TableHandle) => t.unsetLsmWriteSpec();
export const stats = (t: TableHandle, includeGenerationRows: boolean) => t.getLsmStats(includeGenerationRows);
export const flush = (t: TableHandle) => t.flushLsm();
export const compact = (t: TableHandle) => t.compactLsm();
export const checkpoint = (t: TableHandle) => t.checkpointLsm();
