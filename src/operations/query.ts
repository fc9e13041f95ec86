// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const queryTable = notImplemented("queryTable");
export const explainQueryPlan = notImplemented("explainQueryPlan");
export const analyzeQueryPlan = notImplemented("analyzeQueryPlan");
