// A failure nobody anticipated: the client sees a 500 naming only a request id; the cause goes to
// the log under that id. Made real by corrupting a table's manifests on disk.
import { readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { tableFromArrays } from "apache-arrow";
import { afterAll, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { startInProcess, type InProcess } from "./helpers/in-process.js";
import { logLine, removeDir } from "./helpers/quiver.js";

const servers: InProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  removeDir(servers[0].dataDir);
});

it("an engine failure is a 500 without internals, logged with its request id and context", async () => {
  const first = await startInProcess();
  servers.push(first);
  await first.call("POST", "/v1/table/t/create", toStream(tableFromArrays({ id: Int32Array.from([1, 2]) })));
  await first.stop();
  const versions = path.join(first.dataDir, "t.lance", "_versions");
  for (const f of readdirSync(versions)) writeFileSync(path.join(versions, f), "garbage");

  const q = await startInProcess({ dataDir: first.dataDir });
  servers.push(q);
  const r = await q.call("POST", "/v1/table/t/count_rows", {}, { "x-svc-ctx-job": "nightly" });
  expect(r.status).toBe(500);
  expect(r.json).toMatchObject({ type: "/errors/server-error", title: "Internal Server Error", status: 500, code: 18 });
  const requestId = /request (\S+)\)/.exec(r.json.detail)![1];
  expect(r.headers.get("x-request-id")).toBe(requestId);
  expect(r.text).not.toMatch(/garbage|cargo|\.rs:|\n\s+at /);
  const logged = await logLine(q, (l) => l.includes(`"requestId":"${requestId}"`));
  expect(logged).toContain("garbage");
  expect(JSON.parse(logged)).toMatchObject({ msg: "request failed", requestId, op: "CountTableRows", context: { job: "nightly" } });
  // The server keeps serving.
  expect((await q.call("GET", "/v1/namespace/%24/list")).status).toBe(200);
});
