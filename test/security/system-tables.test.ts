// Attack: reaching Quiver's own state through the table API. The shared store's tables live under
// `<data-dir>/.system/` (src/engine/system-tables.ts) and a replica's private state under
// `.quiver/`: registering, declaring or creating a table at a location inside either (however the
// path is spelled) is 400 naming the location, and no table id maps to them.
import { Int32, Table, vectorFromArray } from "apache-arrow";
import { expect, it } from "vitest";
import { toStream } from "../helpers/arrow.js";
import { inProcessForFile } from "../helpers/in-process.js";

const q = inProcessForFile();
const rows = toStream(new Table({ id: vectorFromArray([1], new Int32()) }));

/** Locations inside the reserved directories, spelled as an attacker might. */
const reserved = () => [
  ".system/keys.lance",
  ".system/idempotency.lance",
  ".system",
  "./.system/views.lance",
  "x/../.system/claims.lance",
  ".quiver/admin.key",
  ".quiver",
  `${q.dataDir}/.system/keys.lance`,
  `file://${q.dataDir}/.system/keys.lance`,
  `${q.dataDir}/.quiver`,
];

it("register at a location in .system/ or .quiver/ is 400 naming the location", async () => {
  // The store exists: the admin key's, views' and claims' tables were opened at start.
  for (const location of reserved()) {
    const r = await q.call("POST", "/v1/table/stolen/register", { location });
    expect(r.status, `${location}: ${r.text}`).toBe(400);
    expect(r.json.error, location).toMatch(/^location /);
  }
  expect((await q.call("POST", "/v1/table/stolen/exists", {})).status).toBe(404);
});

it("declare and create with such a location are 400 too, and write nothing there", async () => {
  for (const location of reserved()) {
    const d = await q.call("POST", "/v1/table/decl/declare", { location });
    expect(d.status, `${location}: ${d.text}`).toBe(400);
    const c = await q.call("POST", `/v1/table/made/create?location=${encodeURIComponent(location)}`, rows);
    expect([400, 200], `${location}: ${c.text}`).toContain(c.status);
    // create takes no location from the client: a table made is at a derived location of its own.
    if (c.status === 200) {
      const desc = await q.call("POST", "/v1/table/made/describe", {});
      expect(desc.json.location).not.toMatch(/\/\.(system|quiver)(\/|$)/);
      expect((await q.call("POST", "/v1/table/made/drop", {})).status).toBe(200);
    }
  }
});

it("no table id maps into them: ids that spell the reserved names are refused or derived elsewhere", async () => {
  for (const id of [".system", ".quiver", ".system$keys", ".quiver$x"]) {
    const r = await q.call("POST", `/v1/table/${encodeURIComponent(id)}/create`, rows);
    if (r.status === 200) {
      const desc = await q.call("POST", `/v1/table/${encodeURIComponent(id)}/describe`, {});
      expect(desc.json.location, id).not.toMatch(/\/\.(system|quiver)(\/|$)/);
    } else expect([400, 404], `${id}: ${r.text}`).toContain(r.status);
  }
  // The store's tables are listed nowhere.
  const list = await q.call("GET", "/v1/table");
  expect(JSON.stringify(list.json)).not.toMatch(/keys|idempotency|claims|value_versions/);
});
