// Under --location-role a describe leaves out the table's storage location for roles below it, but
// explain_plan and analyze_plan printed it anyway (`LanceRead: uri=<data dir>/<table>.lance/data`).
// A plan now names the table's directory `<table ns$t>` for such roles, as describe shows it.
import path from "node:path";
import { beforeAll, expect, it } from "vitest";
import { ADMIN_KEY, READ_KEY, serverForFile, WRITE_KEY } from "../helpers/quiver.js";

const q = serverForFile({ args: ["--location-role", "admin"] });
const post = (p: string, body: unknown, key: string) => q.call("POST", p, body, { "x-api-key": key });
const TABLES = ["t", "ns$u"];
const plans: [string, object][] = [
  ["explain_plan", { query: { k: 1, filter: "id > 0" }, verbose: true }],
  ["explain_plan", { query: { k: 1, vector: [1, 2] } }],
  ["explain_plan", { query: { k: 1 }, branch: "b1" }],
  ["analyze_plan", { k: 1, vector: [1, 2] }],
  ["analyze_plan", { k: 1, filter: "id > 0", branch: "b1" }],
];

beforeAll(async () => {
  expect((await post("/v1/namespace/ns/create", {}, ADMIN_KEY)).status).toBe(200);
  for (const t of TABLES) {
    const c = await q.call("POST", `/v1/table/${t}/create`, JSON.stringify([{ id: 1, v: [1, 2] }]), { "content-type": "application/json" });
    expect(c.status, c.text).toBe(200);
    expect((await post(`/v1/table/${t}/branches/create`, { name: "b1" }, ADMIN_KEY)).status).toBe(200);
  }
}, 60_000);

it("a read or write key's explain_plan and analyze_plan name no storage path, as its describe names none", async () => {
  for (const t of TABLES) {
    const location: string = (await post(`/v1/table/${t}/describe`, {}, ADMIN_KEY)).json.location;
    expect(location).toMatch(/\.lance$/);
    for (const key of [READ_KEY, WRITE_KEY]) {
      expect((await post(`/v1/table/${t}/describe`, {}, key)).json.location).toBeUndefined();
      for (const [route, body] of plans) {
        const r = await post(`/v1/table/${t}/${route}`, body, key);
        expect(r.status, r.text).toBe(200);
        const plan: string = r.json;
        expect(plan).toContain("LanceRead");
        for (const leak of [q.dataDir.slice(1), path.basename(location), "tmp/"]) expect(plan, `${route} of ${t}`).not.toContain(leak);
        expect(plan).toContain(`uri=<table ${t}>/`);
      }
    }
  }
});

it("a role given locations still sees them in the plan", async () => {
  const location: string = (await post("/v1/table/t/describe", {}, ADMIN_KEY)).json.location;
  const r = await post("/v1/table/t/explain_plan", { query: { k: 1 } }, ADMIN_KEY);
  expect(r.json).toContain(`uri=${location.slice(1)}/data`);
});
