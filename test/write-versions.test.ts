// Concurrent writes answer the version their own commit produced: distinct versions (inserts and
// merge inserts may share one: group commit puts those that wait together into one commit), and reading the table
// at a write's version shows exactly the writes whose versions are not later. Repeated rounds of 8
// concurrent writes of each kind, on main and on a branch, with nothing lost.
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { fromIPC, toStream } from "./helpers/arrow.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();
const ROUNDS = 6;
const WRITERS = 8;

const rows = (ids: number[], n = 0) => toStream(new Table({ id: vectorFromArray(ids, new Int32()), n: vectorFromArray(ids.map(() => n), new Int32()), s: vectorFromArray(ids.map((i) => `r${i}`), new Utf8()) }));
const post = (id: string, op: string, body?: unknown, qs = "") => q.call("POST", `/v1/table/${id}/${op}${qs}`, body);
let tables = 0;
async function fresh(ids: number[]): Promise<string> {
  const id = `wv${++tables}`;
  expect((await post(id, "create", rows(ids))).status).toBe(200);
  return id;
}

/** Rows id → n of `table` read at `version` (on `branch`). */
async function at(table: string, version: number, branch?: string): Promise<Map<number, number>> {
  const r = await post(table, "query", { k: 100_000, version, ...(branch ? { branch } : {}), columns: { column_names: ["id", "n"] } });
  expect(r.status, r.text).toBe(200);
  const t = fromIPC(r.bytes);
  const ids = t.getChild("id")!.toArray() as Int32Array;
  const ns = t.getChild("n")!.toArray() as Int32Array;
  return new Map(Array.from(ids, (v, i) => [v, ns[i]]));
}

/** Every reported version is distinct and all are greater than `before`. */
function distinct(versions: number[], before: number) {
  expect(new Set(versions).size, `versions ${versions}`).toBe(versions.length);
  for (const v of versions) expect(v).toBeGreaterThan(before);
}

describe("concurrent writes report their own commit's version", () => {
  for (const branch of [undefined, "dev"]) {
    const on = branch ? ` on branch ${branch}` : "";
    const b = branch ? { branch } : {};
    const qs = branch ? `?branch=${branch}` : "";

    it(`inserts${on}: ${ROUNDS} rounds of ${WRITERS}, each visible exactly from its (possibly shared) version`, async () => {
      const t = await fresh([0]);
      if (branch) expect((await post(t, "branches/create", { name: branch })).status).toBe(200);
      let base = 1;
      for (let round = 0; round < ROUNDS; round++) {
        const ids = Array.from({ length: WRITERS }, (_, i) => 1 + round * WRITERS + i);
        const replies = await Promise.all(ids.map((id) => post(t, "insert", rows([id]), qs)));
        const versions = replies.map((r) => (expect(r.status, r.text).toBe(200), r.json.version as number));
        for (const v of versions) expect(v).toBeGreaterThan(base);
        for (const v of versions) {
          const seen = await at(t, v, branch);
          ids.forEach((id, i) => expect(seen.has(id), `round ${round}: row ${id} (v${versions[i]}) at v${v}`).toBe(versions[i] <= v));
        }
        base = Math.max(...versions);
      }
      expect((await post(t, "count_rows", b)).json).toBe(1 + ROUNDS * WRITERS);
    });

    it(`updates, deletes and merge inserts${on}: each visible exactly from its version`, async () => {
      const ids = Array.from({ length: WRITERS * 3 }, (_, i) => i);
      const t = await fresh(ids);
      if (branch) expect((await post(t, "branches/create", { name: branch })).status).toBe(200);
      for (let round = 1; round <= ROUNDS; round++) {
        const before = (await post(t, "describe", b)).json.version as number;
        const updates = ids.slice(0, WRITERS).map((id) => post(t, "update", { ...b, predicate: `id = ${id}`, updates: [["n", String(round)]] }));
        const merges = ids.slice(WRITERS, 2 * WRITERS).map((id) => post(t, "merge_insert", rows([id], round), `?on=id&when_matched_update_all=true${branch ? `&branch=${branch}` : ""}`));
        const replies = await Promise.all([...updates, ...merges]);
        const versions = replies.map((r) => (expect(r.status, r.text).toBe(200), r.json.version as number));
        // Updates commit one by one; concurrent merge inserts may share a commit (group commit), only with each other.
        distinct(versions.slice(0, WRITERS), before);
        for (const v of versions.slice(WRITERS)) expect(versions.slice(0, WRITERS)).not.toContain(v);
        for (const v of versions) {
          const seen = await at(t, v, branch);
          ids.slice(0, 2 * WRITERS).forEach((id, i) => expect(seen.get(id), `round ${round}: row ${id} (v${versions[i]}) at v${v}`).toBe(versions[i] <= v ? round : round - 1));
        }
      }
      const gone = ids.slice(2 * WRITERS);
      const deletes = await Promise.all(gone.map((id) => post(t, "delete", { ...b, predicate: `id = ${id}` })));
      const dv = deletes.map((r) => (expect(r.status, r.text).toBe(200), r.json.version as number));
      distinct(dv, 0);
      for (const v of dv) {
        const seen = await at(t, v, branch);
        gone.forEach((id, i) => expect(seen.has(id)).toBe(dv[i] > v));
      }
    });
  }

  it("schema changes: concurrent add_columns and field metadata updates each answer their own version", async () => {
    const t = await fresh([1, 2]);
    const adds = await Promise.all(Array.from({ length: WRITERS }, (_, i) => post(t, "add_columns", { new_columns: [{ name: `c${i}`, expression: `${i}` }] })));
    const av = adds.map((r) => (expect(r.status, r.text).toBe(200), r.json.version as number));
    distinct(av, 1);
    for (const v of av) {
      const names = (await post(t, "describe", { version: v })).json.schema.fields.map((f: { name: string }) => f.name);
      av.forEach((w, i) => expect(names.includes(`c${i}`), `c${i} (v${w}) at v${v}`).toBe(w <= v));
    }
    const metas = await Promise.all(Array.from({ length: WRITERS }, (_, i) => post(t, "update_field_metadata", { updates: [{ path: `c${i}`, metadata: { k: "v" } }] })));
    distinct(metas.map((r) => (expect(r.status, r.text).toBe(200), r.json.version as number)), Math.max(...av));
  });
});
