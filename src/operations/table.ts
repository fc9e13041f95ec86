// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const listTables = notImplemented("listTables");
export const listAllTables = notImplemented("listAllTables");
export const createTable = notImplemented("createTable");
export const declareTable = notImplemented("declareTable");
export const registerTable = notImplemented("registerTable");
export const describeTable = notImplemented("describeTable");
export const tableExists = notImplemented("tableExists");
export const dropTable = notImplemented("dropTable");
export const deregisterTable = notImplemented("deregisterTable");
export const renameTable = notImplemented("renameTable");
