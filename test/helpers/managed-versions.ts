// Writers of LanceDB's REST namespace client with managed versioning, racing on one version of a
// table through Quiver: the check both the local and the object-store suites run.
import type * as lancedb from "@lancedb/lancedb";
import { expect } from "vitest";
import type { Quiver } from "./quiver.js";

/**
 * Three handles opened at one version commit at once, in rounds until Quiver answered a 409 to
 * one of them; every write then landed (retried by the client), each as its own version.
 */
export async function racingWritersLoseNothing(q: Quiver, db: lancedb.Connection, open: (name: string) => Promise<lancedb.Table>): Promise<void> {
  await db.createTable("race", [{ id: 0 }]);
  const conflicts = () => q.stderr().split("\n").filter((l) => l.includes('"path":"/v1/table/race/version/create"') && l.includes('"status":409')).length;
  let round = 0;
  for (; round < 10 && conflicts() === 0; round++) {
    const writers = await Promise.all([1, 2, 3].map(() => open("race")));
    const results = await Promise.allSettled(writers.map((w, i) => w.add([{ id: round * 10 + i + 1 }])));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
  }
  expect(conflicts()).toBeGreaterThan(0);
  const want = [0, ...Array.from({ length: round }, (_, r) => [1, 2, 3].map((i) => r * 10 + i)).flat()];
  const rows = await (await open("race")).query().toArray();
  expect(rows.map((r) => r.id).sort((x, y) => x - y)).toEqual(want);
  const versions = (await q.call("POST", "/v1/table/race/version/list?descending=true")).json.versions.map((v: { version: number }) => v.version);
  expect(versions).toEqual(Array.from({ length: 1 + 3 * round }, (_, i) => 3 * round + 1 - i));
}
