// Placeholder until this resource lands: every operation answers 406.
import { notImplemented } from "./define.js";

export const addColumns = notImplemented("addColumns");
export const alterColumns = notImplemented("alterColumns");
export const dropColumns = notImplemented("dropColumns");
export const updateFieldMetadata = notImplemented("updateFieldMetadata");
export const updateSchemaMetadata = notImplemented("updateSchemaMetadata");
