// Series labelled with a table (quiver_table_*{table="…"}) outlived their table: after a drop or a
// rename, /metrics kept exporting the old name's figures for good (`quiver_table_fragments{table=
// "tenant_3$t3"} 2` while `exists` answered 404). They now go with the table: on the replica that
// dropped or renamed it at once, on another replica sharing the store once its catalog sees it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeDir, startQuiver, tempDataDir, type Quiver } from "./helpers/quiver.js";

let a: Quiver;
let b: Quiver;
const stateB = tempDataDir();
beforeAll(async () => {
  a = await startQuiver({ args: ["--consistency-interval-ms", "0"] });
  b = await startQuiver({ dataUri: a.dataDir, dataDir: stateB, args: ["--consistency-interval-ms", "0"] });
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  if (a) removeDir(a.dataDir);
  removeDir(stateB);
});

const json = { "content-type": "application/json" };
const tablesIn = async (s: Quiver) => {
  const r = await s.call("GET", "/metrics");
  expect(r.status, r.text).toBe(200);
  return [...new Set([...r.text.matchAll(/^quiver_table_\w+\{[^}]*table="([^"]+)"/gm)].map((m) => m[1]))].sort();
};

describe("per-table series of dropped and renamed tables", () => {
  it("leave /metrics with their table, on the replica that dropped or renamed it and on another", async () => {
    for (const t of ["kept", "gone", "old"]) {
      expect((await a.call("POST", `/v1/table/${t}/create`, JSON.stringify([{ id: 1 }]), json)).status).toBe(200);
      for (const s of [a, b]) expect((await s.call("POST", `/v1/table/${t}/stats`, {})).status).toBe(200);
    }
    for (const s of [a, b]) expect(await tablesIn(s)).toEqual(["gone", "kept", "old"]);

    expect((await a.call("POST", "/v1/table/gone/drop", {})).status).toBe(200);
    const renamed = await a.call("POST", "/v1/table/old/rename", { new_table_name: "new" });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await a.call("POST", "/v1/table/gone/exists", {})).status).toBe(404);
    expect(await tablesIn(a)).toEqual(["kept"]);

    // b learns of both at its next look at the catalog (here: a request, at interval 0).
    expect((await b.call("POST", "/v1/table/old/exists", {})).status).toBe(404);
    expect(await tablesIn(b)).toEqual(["kept"]);
    // The new name's figures are its own once read.
    expect((await b.call("POST", "/v1/table/new/stats", {})).status).toBe(200);
    expect(await tablesIn(b)).toEqual(["kept", "new"]);
  }, 60_000);
});
