// Concurrent creates of different tables, from two replicas on one data directory: every create
// lands in the shared catalog table; none is answered 500 (a lost race there is retried by LanceDB,
// and one it gives up is a 503 with Retry-After, which a client retries).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { removeDir, startQuiver } from "./helpers/quiver.js";

it("8 creates at once (4 per replica), 4 rounds: each 200, or 503 with Retry-After that succeeds when retried; never a 500", { timeout: 300_000 }, async () => {
  const a = await startQuiver();
  const stateDir = mkdtempSync(path.join(tmpdir(), "quiver-state-"));
  const b = await startQuiver({ dataDir: a.dataDir, args: ["--state-dir", stateDir] });
  try {
    const create = async (name: string, i: number) => {
      const q = i % 2 === 0 ? a : b;
      for (;;) {
        const r = await q.call("POST", `/v1/table/${name}/create`, [{ id: i }]);
        if (r.status !== 503) return r;
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
        await new Promise((res) => setTimeout(res, 1000 * Number(r.headers.get("retry-after"))));
      }
    };
    for (let round = 0; round < 4; round++) {
      const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => create(`r${round}_t${i}`, i)));
      for (const r of replies) expect(r.status, r.text).toBe(200);
    }
    // Replica a sees b's last creates within its consistency interval (1 s): every one is listed.
    const listed = async () => ((await a.call("GET", "/v1/namespace/%24/table/list")).json.tables as string[]).length;
    await expect.poll(listed, { timeout: 15_000, interval: 250 }).toBe(32);
  } finally {
    await b.stop();
    await a.stop();
    removeDir(a.dataDir);
    removeDir(stateDir);
  }
});
