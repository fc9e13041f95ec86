// GET /metrics carries series labelled with a table (`quiver_table_*{table="ns2$secret"}`): before,
// a read key limited to ns1 saw ns2's table names and sizes there. A credential limited to
// namespace prefixes now sees the series of the tables it covers only; one without prefixes, or a
// public scrape (--metrics-public, which the operator opens on purpose), sees every table's.
import { describe, expect, it } from "vitest";
import { ADMIN_KEY, request, serverForFile, type Quiver } from "../helpers/quiver.js";

const KEYS = { QUIVER_API_KEYS: `${ADMIN_KEY}:admin,k-r1:read:ns1,k-w2:write:ns2,k-ra:read` };
const q = serverForFile({ env: KEYS });
const open = serverForFile({ args: ["--metrics-public"], env: KEYS });

/** ns1$t and ns2$secret, each with its figures recorded (a stats call reads them). */
async function twoTenants(s: Quiver) {
  for (const ns of ["ns1", "ns2"]) expect((await s.call("POST", `/v1/namespace/${ns}/create`, {})).status).toBe(200);
  for (const id of ["ns1$t", "ns2$secret"]) {
    expect((await s.call("POST", `/v1/table/${id}/create`, JSON.stringify([{ id: 1 }]), { "content-type": "application/json" })).status).toBe(200);
    expect((await s.call("POST", `/v1/table/${id}/stats`, {})).status).toBe(200);
  }
}

const scrape = async (s: Quiver, key?: string) => {
  const r = await request(`${s.url}/metrics`, "GET", undefined, key ? { "x-api-key": key } : {});
  expect(r.status, r.text).toBe(200);
  return r.text;
};
const tablesIn = (text: string) => [...new Set([...text.matchAll(/^quiver_table_\w+\{[^}]*table="([^"]+)"/gm)].map((m) => m[1]))].sort();

describe("per-table series of GET /metrics", () => {
  it("a key limited to ns1 sees ns1's tables only; one limited to ns2, ns2's; one without prefixes, all", async () => {
    await twoTenants(q);
    const r1 = await scrape(q, "k-r1");
    expect(tablesIn(r1)).toEqual(["ns1$t"]);
    expect(r1).not.toContain("ns2$secret");
    expect(r1).toContain("# TYPE quiver_requests_total counter");
    expect(tablesIn(await scrape(q, "k-w2"))).toEqual(["ns2$secret"]);
    expect(tablesIn(await scrape(q, "k-ra"))).toEqual(["ns1$t", "ns2$secret"]);
    expect(tablesIn(await scrape(q, ADMIN_KEY))).toEqual(["ns1$t", "ns2$secret"]);
  });

  it("a public scrape (--metrics-public) sees every table's", async () => {
    await twoTenants(open);
    expect(tablesIn(await scrape(open))).toEqual(["ns1$t", "ns2$secret"]);
  });
});

// quiver_jobs counted every tenant's jobs for any scrape: a key limited to ns1 learned how many
// index builds (and other jobs) ns2 ran, queued or failed. Its counts now cover the tables it sees.
describe("quiver_jobs of GET /metrics", () => {
  const jobs = (text: string) => [...text.matchAll(/^quiver_jobs\{([^}]*)\} (\d+)/gm)].reduce((n, m) => (/kind="create_index"/.test(m[1]) ? n + Number(m[2]) : n), 0);

  it("a key limited to ns1 counts ns1's jobs only; one without prefixes, every tenant's", async () => {
    const ix = await q.call("POST", "/v1/table/ns2$secret/create_index", { column: "id", index_type: "BTREE" });
    expect(ix.status, ix.text).toBe(200);
    expect(jobs(await scrape(q, "k-ra"))).toBeGreaterThanOrEqual(1);
    expect(jobs(await scrape(q, ADMIN_KEY))).toBeGreaterThanOrEqual(1);
    expect(jobs(await scrape(q, "k-w2"))).toBeGreaterThanOrEqual(1);
    const r1 = await scrape(q, "k-r1");
    expect(r1).toContain("# TYPE quiver_jobs gauge");
    expect(r1).toMatch(/^quiver_jobs\{[^}]*kind="create_index"[^}]*\} 0$/m);
    expect(jobs(r1)).toBe(0);
  });
});
