// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const describeTransaction = notImplemented("describeTransaction");
export const alterTransaction = notImplemented("alterTransaction");
