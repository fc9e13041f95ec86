// Row 12 of the bounds attack: a write key created 734 tables, with no quota. Now a tenant (a
// top-level namespace, all its nested namespaces together) holds at most --max-tables-per-tenant
// tables and --max-namespaces-per-tenant namespaces: a create, declare, register or rename past it
// is a 403 naming the quota and creates nothing, and another tenant is not affected.
import { readdirSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";
import { post, rows, TENANT_KEYS, W1, W2 } from "../helpers/sandbox.js";

const q = serverForFile({ args: ["--max-tables-per-tenant", "3", "--max-namespaces-per-tenant", "2"], env: { QUIVER_API_KEYS: TENANT_KEYS } });

beforeAll(async () => {
  for (const ns of ["ns1", "ns2"]) expect((await post(q, `/v1/namespace/${ns}/create`, {})).status).toBe(200);
});

const exists = async (table: string) => (await post(q, `/v1/table/${table}/exists`, {})).status === 200;
const expectQuota = (r: { status: number; json: { detail: string }; text: string }, what: RegExp) => {
  expect(r.status, r.text).toBe(403);
  expect(r.json.detail).toMatch(what);
};

describe("tables per tenant", () => {
  it("ns1's fourth table is refused with 403 naming the quota, nothing is written; ns2 still creates; a drop makes room", async () => {
    for (const t of ["t1", "t2"]) expect((await post(q, `/v1/table/ns1$${t}/create`, rows(3), W1)).status).toBe(200);
    expect((await post(q, "/v1/namespace/ns1$sub/create", {}, W1)).status).toBe(200);
    // Nested namespaces count with their tenant.
    expect((await post(q, "/v1/table/ns1$sub$t3/create", rows(3), W1)).status).toBe(200);

    expectQuota(await post(q, "/v1/table/ns1$t4/create", rows(3), W1), /tenant "ns1" already holds 3 tables \(max-tables-per-tenant\)/);
    expectQuota(await post(q, "/v1/table/ns1$t4/declare", {}, W1), /max-tables-per-tenant/);
    expectQuota(await post(q, "/v1/table/ns1$sub$t4/create", rows(3), W1), /max-tables-per-tenant/);
    expect(await exists("ns1$t4")).toBe(false);
    expect(await exists("ns1$sub$t4")).toBe(false);
    // No table directory was written for them.
    expect(readdirSync(q.dataDir).filter((n) => n.includes("t4"))).toEqual([]);

    // Another tenant is not affected, and cannot move a table into the full one.
    expect((await post(q, "/v1/table/ns2$u1/create", rows(3), W2)).status).toBe(200);
    expectQuota(await post(q, "/v1/table/ns2$u1/rename", { new_table_name: "moved", new_namespace_id: ["ns1"] }), /max-tables-per-tenant/);
    expect(await exists("ns2$u1")).toBe(true);
    // A rename inside the tenant is no new table.
    expect((await post(q, "/v1/table/ns1$t1/rename", { new_table_name: "t1b" }, W1)).status).toBe(200);

    expect((await post(q, "/v1/table/ns1$t2/drop", {}, W1)).status).toBe(200);
    expect((await post(q, "/v1/table/ns1$t4/create", rows(3), W1)).status).toBe(200);
  });
});

describe("namespaces per tenant", () => {
  it("ns2's third namespace is refused with 403 naming the quota; ns1's are its own", async () => {
    for (const n of ["a", "b"]) expect((await post(q, `/v1/namespace/ns2$${n}/create`, {}, W2)).status).toBe(200);
    expectQuota(await post(q, "/v1/namespace/ns2$a$c/create", {}, W2), /tenant "ns2" already holds 2 namespaces \(max-namespaces-per-tenant\)/);
    expect((await post(q, "/v1/namespace/ns2$a$c/exists", {})).status).toBe(404);
    expect((await post(q, "/v1/namespace/ns1$other/create", {}, W1)).status).toBe(200);
  });
});
