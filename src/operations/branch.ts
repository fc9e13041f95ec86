// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const listTableBranches = notImplemented("listTableBranches");
export const createTableBranch = notImplemented("createTableBranch");
export const deleteTableBranch = notImplemented("deleteTableBranch");
