// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const listTableTags = notImplemented("listTableTags");
export const getTableTagVersion = notImplemented("getTableTagVersion");
export const createTableTag = notImplemented("createTableTag");
export const updateTableTag = notImplemented("updateTableTag");
export const deleteTableTag = notImplemented("deleteTableTag");
