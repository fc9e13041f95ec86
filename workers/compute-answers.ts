// The sandbox's answers, checked as data before anything is written from them: bytes within a
// bound (the channel's reader refuses a larger frame before reading it), Arrow IPC, exactly the
// expected columns with the expected types, the expected number of rows. Key and passthrough
// columns are never taken from an answer: a UDF's answer is its one computed column (the keys come
// from the rows this side sent), and a chunker's answer says for each output row which of the sent
// rows it came from (checked to be one of them, in order), so a
// sandbox that lies cannot make the trusted side write a row it was not asked to compute.
import type * as A from "apache-arrow";
import { PARENT, type UdfDefinition } from "../src/compute/udf.js";
import { CHUNK, SOURCE_ROW_ID } from "../src/compute/views.js";
import { arrow } from "../src/engine/arrow.js";
import { fromJsonField, fromJsonType } from "../src/engine/json-arrow.js";
import type { Compute, ComputeAnswer } from "./compute-client.js";
import type { TableRequest } from "./threads/table-functions.js";

// A task is compiled (once per worker) and run (one batch) under the UDF's time limit each; the
// sandbox stops a task's worker past both plus a margin for the host's own work, which must hold on
// a loaded machine at nice 19 (load 26 on 2 cores starved a 1-row task for 4 s): this backstop is
// for runaway host-side code, the time limits themselves are enforced inside the thread.
const deadline = (timeoutMs: number) => 2 * timeoutMs + 30_000;

/** The answer's table, checked to hold exactly `expected` (names, order, types). */
function checked(answer: ComputeAnswer, expected: A.Field[], what: string): A.Table {
  if ("error" in answer) throw new Error(answer.error);
  if (!("output" in answer) || !(answer.output instanceof Uint8Array)) throw new Error(`${what} gave no output`);
  let t: A.Table;
  try {
    t = arrow.tableFromIPC(answer.output);
  } catch {
    throw new Error(`${what} answered bytes that are not Arrow IPC`);
  }
  const got = t.schema.fields;
  const fits = got.length === expected.length && got.every((f, i) => f.name === expected[i].name && arrow.util.compareTypes(f.type, expected[i].type));
  if (!fits) throw new Error(`${what} answered columns ${got.map((f) => `${f.name}: ${String(f.type)}`).join(", ")}; expected ${expected.map((f) => `${f.name}: ${String(f.type)}`).join(", ")}`);
  return t;
}

/** Check a UDF or table function compiles; its failure in words, or null. */
export async function checkInSandbox(compute: Pick<Compute, "run">, task: Parameters<Compute["run"]>[0], timeoutMs: number): Promise<string | null> {
  const answer = await compute.run(task, deadline(timeoutMs));
  return "error" in answer ? answer.error : null;
}

/** A UDF over `input` (the `keep` columns and its inputs): the `keep` columns as sent and the computed column. */
export async function udfInSandbox(compute: Compute, udf: UdfDefinition, bytes: Uint8Array, input: A.Table, keep: string[]): Promise<A.Table> {
  const answer = await compute.run({ name: "udf", request: { op: "run", udf, input: bytes, keep } }, deadline(udf.timeoutMs));
  const out = checked(answer, [new arrow.Field(udf.output.name, fromJsonType(udf.output.type, udf.output.name), true)], "the UDF");
  if (out.numRows !== input.numRows) throw new Error(`the UDF answered ${out.numRows} rows for ${input.numRows}`);
  return new arrow.Table({ ...Object.fromEntries(keep.map((k) => [k, input.getChild(k)!])), [udf.output.name]: out.getChild(udf.output.name)! });
}

/**
 * A table function over `input` (source rows; a chunker's with their `__source_row_id`): a udtf's
 * output rows, or a chunker's with the id, ordinal and passthrough columns of their source rows.
 */
export async function tableInSandbox(compute: Compute, req: Omit<TableRequest, "op" | "input">, bytes: Uint8Array, input: A.Table): Promise<A.Table> {
  const what = `the ${req.kind}`;
  const fields = req.output.map((f) => fromJsonField(f));
  const chunker = req.kind === "chunker";
  const answer = await compute.run({ name: "table", request: { ...req, op: "run", input: bytes } }, deadline(req.timeoutMs));
  const out = checked(answer, chunker ? [...fields, new arrow.Field(PARENT, new arrow.Uint32(), true)] : fields, what);
  if (!chunker) return out;
  const parents = Array.from(out.getChild(PARENT)!.toArray() as Uint32Array);
  parents.forEach((p, i) => {
    if (p >= input.numRows || (i > 0 && p < parents[i - 1])) throw new Error(`${what} answered output row ${i} for source row ${p} (out of order or not one of the ${input.numRows} sent)`);
  });
  const ids = input.getChild(SOURCE_ROW_ID)!;
  const chunk: number[] = [];
  parents.forEach((p, i) => chunk.push(i > 0 && parents[i - 1] === p ? chunk[i - 1] + 1 : 0));
  const columns: Record<string, A.Vector> = {
    [SOURCE_ROW_ID]: arrow.vectorFromArray(parents.map((p) => ids.get(p) as bigint), new arrow.Uint64()),
    [CHUNK]: arrow.vectorFromArray(chunk, new arrow.Uint32()),
  };
  for (const f of input.schema.fields) {
    if (f.name === SOURCE_ROW_ID || fields.some((o) => o.name === f.name)) continue;
    const src = input.getChild(f.name)!;
    columns[f.name] = arrow.vectorFromArray(parents.map((p) => src.get(p)), f.type);
  }
  for (const f of fields) columns[f.name] = out.getChild(f.name)!;
  return new arrow.Table(columns);
}
