// Rows as JSON on the wire: a large NDJSON answer is written as it is made (chunked, without a
// Content-Length), over a real server (test/json-rows.test.ts has the rest, in process).
import { describe, expect, it } from "vitest";
import { serverForFile } from "./helpers/quiver.js";

const q = serverForFile({ args: ["--max-json-body", "200000"] });

const asNdjson = { "content-type": "application/x-ndjson" };

function post(path: string, body: string, headers: Record<string, string>) {
  return q.call("POST", path, body, headers);
}

describe("JSON rows out", () => {
  it("a large NDJSON answer streams (chunked, no Content-Length) with every row", async () => {
    const rows = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ id: i, text: "x".repeat(40) })).join("\n");
    expect((await post("/v1/table/many/create", rows, asNdjson)).status).toBe(200);
    const res = await fetch(`${q.url}/v1/table/many/query`, {
      method: "POST",
      headers: { "x-api-key": "test-admin-key", accept: "application/x-ndjson", "content-type": "application/json" },
      body: JSON.stringify({ k: 10_000 }),
    });
    expect(res.headers.get("content-length")).toBeNull();
    const lines = (await res.text()).trim().split("\n");
    expect(lines.length).toBe(3000);
    expect(new Set(lines.map((l) => JSON.parse(l).id)).size).toBe(3000);
  });
});
