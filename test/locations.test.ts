// Which credentials learn a table's storage location (describe, declare, create): those whose
// role is at least --location-role. A client holding the location can open the files itself.
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { afterAll, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { READ_KEY, WRITE_KEY, removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";

const servers: Quiver[] = [];
afterAll(async () => {
  for (const s of servers) {
    await s.stop();
    removeDir(s.dataDir);
  }
});
const rows = toStream(new Table({ id: vectorFromArray([1, 2], new Int32()) }));

it("by default a read key's describe carries the location (for reading)", async () => {
  const q = await startQuiver();
  servers.push(q);
  expect((await q.call("POST", "/v1/table/t/create", rows)).status).toBe(200);
  const d = await q.call("POST", "/v1/table/t/describe", { with_table_uri: true }, { "x-api-key": READ_KEY });
  expect(d.json.location).toMatch(/t\.lance$/);
  expect(d.json.table_uri).toBe(d.json.location);
});

it("with --location-role write a read key's describe has no location or table_uri; write keys get it from describe, declare and create", async () => {
  const q = await startQuiver({ args: ["--location-role", "write"] });
  servers.push(q);
  const created = await q.call("POST", "/v1/table/t/create", rows, { "x-api-key": WRITE_KEY });
  expect(created.json.location).toMatch(/t\.lance$/);
  const asRead = await q.call("POST", "/v1/table/t/describe", { with_table_uri: true }, { "x-api-key": READ_KEY });
  expect(asRead.status).toBe(200);
  expect(asRead.json.version).toBe(1);
  expect(asRead.json).not.toHaveProperty("location");
  expect(asRead.json).not.toHaveProperty("table_uri");
  const asWrite = await q.call("POST", "/v1/table/t/describe", {}, { "x-api-key": WRITE_KEY });
  expect(asWrite.json.location).toBe(created.json.location);
  const declared = await q.call("POST", "/v1/table/d/declare", {}, { "x-api-key": WRITE_KEY });
  expect(declared.json.location).toMatch(/d\.lance$/);
});

it("an unknown --location-role stops startup naming the option", async () => {
  await expect(startQuiver({ args: ["--location-role", "owner"] })).rejects.toThrow(/location-role must be read, write or admin, got "owner"/);
});
