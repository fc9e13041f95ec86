// Materialized-view request parts shared by the view tests: an output schema (an Arrow IPC schema,
// base64) and a UDTF envelope (its backend and source as base64 JSON).
import { Field, Float64, Int64, Schema, Table, Utf8 } from "apache-arrow";
import { toStream } from "./arrow.js";

export const schemaOf = (fields: [string, "int64" | "float64" | "utf8"][]) => {
  const types = { int64: new Int64(), float64: new Float64(), utf8: new Utf8() };
  return Buffer.from(toStream(new Table(new Schema(fields.map(([n, t]) => new Field(n, types[t], true)))))).toString("base64");
};
export const envelope = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64");
