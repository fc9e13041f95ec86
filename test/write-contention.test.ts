// An insert whose commit LanceDB gave up on after its own retries, for other writers' commits
// (`Too many concurrent writers`, at its 30 s retry_timeout: with 3 replicas and automatic
// maintenance on Azurite, a rolling restart's single-row inserts met it), was answered 503
// write_contention though nothing was committed and its deadline had time left. It is tried again
// while the request still waits, a few times; past its deadline it is not (tables.write begins a
// commit only within it). The engine's refusal is made here by failing the table's write turn with
// LanceDB's words, as test/unit/pipeline.test.ts does for the catalog: no number of writers makes
// LanceDB give up at a chosen moment.
import { afterEach, expect, it } from "vitest";
import { inProcessForFile } from "./helpers/in-process.js";
import { sample } from "./helpers/metrics.js";

const q = inProcessForFile();
const GAVE_UP = "lance error: Too many concurrent writers. Attempted 3 retries.";

/** The table's write turns fail with LanceDB's give-up for the first `n` commits, then commit. */
function contended(n: number): () => void {
  const tables = q.services.tables;
  const write = tables.write;
  let left = n;
  tables.write = (entry, branch, of, commit) => (left-- > 0 ? Promise.reject(new Error(GAVE_UP)) : write.call(tables, entry, branch, of, commit));
  return () => (tables.write = write);
}
let restore = () => {};
afterEach(() => restore());

const retries = async () => sample((await q.call("GET", "/metrics")).text, "quiver_commit_retries_total", { kind: "contention" }) ?? 0;
const rows = async () => (await q.call("POST", "/v1/table/c/count_rows", {})).json as number;

it("an insert LanceDB gave up on for contention is committed on a later try, once, while its request waits", async () => {
  expect((await q.call("POST", "/v1/table/c/create", [{ id: 1 }])).status).toBe(200);
  const before = await retries();
  restore = contended(2);
  const r = await q.call("POST", "/v1/table/c/insert", [{ id: 2 }]);
  expect(r.status, r.text).toBe(200);
  restore();
  expect(await rows()).toBe(2);
  expect(await retries()).toBe(before + 2);
});

it("given up on every try it is 503 write_contention, with nothing committed", async () => {
  restore = contended(100);
  const r = await q.call("POST", "/v1/table/c/insert", [{ id: 3 }]);
  expect(r.status).toBe(503);
  expect(r.json.detail).toMatch(/^too many concurrent writers/);
  restore();
  expect(await rows()).toBe(2);
});
