// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const insertIntoTable = notImplemented("insertIntoTable");
export const mergeInsertIntoTable = notImplemented("mergeInsertIntoTable");
export const updateTable = notImplemented("updateTable");
export const deleteFromTable = notImplemented("deleteFromTable");
export const countTableRows = notImplemented("countTableRows");
export const getTableStats = notImplemented("getTableStats");
