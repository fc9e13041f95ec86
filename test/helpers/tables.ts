// Small table fixtures and calls over HTTP, shared by the table-operation test files.
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import { toStream } from "./arrow.js";
import type { Caller } from "./quiver.js";

/** An Arrow IPC stream of rows {id, name}. */
export const idNameRows = (ids: number[], names = ids.map((i) => `n${i}`)) =>
  toStream(new Table({ id: vectorFromArray(ids, new Int32()), name: vectorFromArray(names, new Utf8()) }));

/** POST /v1/table/{id}/{op} and count_rows against one server. */
export function tableCalls(q: Caller) {
  const post = (id: string, op: string, body: unknown = {}, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);
  const count = async (id: string, body: unknown = {}) => (await post(id, "count_rows", body)).json as number;
  return { post, count };
}
