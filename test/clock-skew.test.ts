// Issue 52: a replica whose clock ran 90 s ahead took jobs over from live replicas 5 times. Now a
// replica measures its clock against the store's at start (a file it writes in `.system/`; on
// local disk its mtime is the kernel's clock) and refuses to start past --max-clock-skew-ms, and
// other replicas' leases are judged with twice the bound to spare. The skew is made with
// QUIVER_TEST_CLOCK_OFFSET_MS, which shifts the server's clock readings (src/util/clock.ts); the
// lease's holder is this test process, renewing it in the shared job table as a replica does.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openSystemTables } from "../src/engine/system-tables.js";
import { openStore, type JobRecord } from "../src/jobs/store.js";
import { startAzurite } from "./helpers/azurite.js";
import { removeDir, startQuiver, tempDataDir, type Quiver } from "./helpers/quiver.js";

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));
const fresh = () => {
  const d = tempDataDir();
  dirs.push(d);
  return d;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a replica's clock against the store's", () => {
  it("10 s ahead, or 10 s behind, the start fails (exit 1) naming the skew and --max-clock-skew-ms", async () => {
    for (const [offset, way] of [["10000", "ahead of"], ["-10000", "behind"]]) {
      const failed = await startQuiver({ dataDir: fresh(), env: { QUIVER_TEST_CLOCK_OFFSET_MS: offset } }).then(
        async (q) => void (await q.stop()),
        (err: Error) => err.message,
      );
      expect(failed).toMatch(new RegExp(`exited with 1[\\s\\S]*this replica's clock is \\d+ ms ${way} the clock of the data directory's file system .*more than --max-clock-skew-ms 2000`));
      // At least what the file's stamp and the round trip cannot explain: 10 s, less a second and the write.
      const skew = Number(/clock is (\d+) ms/.exec(failed!)![1]);
      expect(skew).toBeGreaterThan(8_000);
      expect(skew).toBeLessThanOrEqual(10_000);
    }
  }, 120_000);

  // A clock in step starts there: every other test on Azurite does.
  it("on an object store (Azurite: Last-Modified in whole seconds), 10 s ahead is refused naming the store", async () => {
    const az = await startAzurite();
    try {
      await az.createContainer("clocks");
      const args = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
      const failed = await startQuiver({ dataDir: fresh(), dataUri: "az://clocks/ahead", args, env: { QUIVER_TEST_CLOCK_OFFSET_MS: "10000" } }).then(
        async (q) => void (await q.stop()),
        (err: Error) => err.message,
      );
      expect(failed).toMatch(/exited with 1[\s\S]*this replica's clock is \d+ ms ahead of the clock of the object store \(at least; measured on a file it wrote in az:\/\/clocks\/ahead\/\.system\).*more than --max-clock-skew-ms 2000/);
    } finally {
      await az.stop();
    }
  }, 120_000);

  it("1.5 s ahead (within the bound) it starts, takes over no lease its holder renews, and takes it over once the renewals stop", async () => {
    const dataDir = fresh();
    const leaseMs = 1_000;
    let q: Quiver | undefined;
    try {
      q = await startQuiver({ dataDir, env: { QUIVER_TEST_CLOCK_OFFSET_MS: "1500" }, args: ["--job-lease-ms", String(leaseMs), "--auto-maintenance", "off"] });
      expect((await fetch(`${q.url}/readyz`)).status).toBe(200);
      const holderState = mkdtempSync(path.join(tmpdir(), "quiver-holder-"));
      dirs.push(holderState);
      const store = await openStore(openSystemTables(dataDir, {}), holderState);
      const lease = () => ({ replica: "holder", expires: Date.now() + leaseMs });
      const rec: JobRecord = { id: "held", status: "Running", operation: "maintenance", table: ["t"], spec: { branch: null, cleanup: false, auto: false }, properties: {}, createdAt: Date.now(), startedAt: Date.now(), replica: "holder", lease: lease() };
      await store.insert(rec);
      const held = (r: JobRecord | undefined) => r?.status === "Running" && r.lease?.replica === "holder";
      // Renewed as a replica renews it, a third of a lease at most apart; watched meanwhile.
      const seen: (JobRecord | undefined)[] = [];
      for (const end = Date.now() + 3_000; Date.now() < end; ) {
        seen.push(await store.update("held", (s) => (held(s) ? { ...s, lease: lease() } : undefined)));
        await sleep(250);
      }
      expect(seen.every(held), JSON.stringify(seen.find((r) => !held(r)))).toBe(true);
      // Renewals stop: taken over once the lease, its grace and twice the bound passed (by the server's clock).
      const stopped = Date.now();
      let now = await store.read("held");
      while (held(now) && Date.now() - stopped < 20_000) {
        await sleep(100);
        now = await store.read("held");
      }
      expect(held(now)).toBe(false);
      // Not at its expiry, which by the server's clock came 1.5 s early.
      expect(Date.now() - stopped).toBeGreaterThan(2_000);
    } finally {
      await q?.stop();
    }
  }, 120_000);
});
