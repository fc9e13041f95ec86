// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const createTableIndex = notImplemented("createTableIndex");
export const createTableScalarIndex = notImplemented("createTableScalarIndex");
export const listTableIndices = notImplemented("listTableIndices");
export const describeTableIndexStats = notImplemented("describeTableIndexStats");
export const dropTableIndex = notImplemented("dropTableIndex");
