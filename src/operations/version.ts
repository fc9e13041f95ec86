// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const listTableVersions = notImplemented("listTableVersions");
export const describeTableVersion = notImplemented("describeTableVersion");
export const restoreTable = notImplemented("restoreTable");
