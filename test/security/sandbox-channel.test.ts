// Item 2 of the attack on the compute sandbox: escaped code writes raw frames to its channel (fd 3).
// Before, that channel was Node's IPC channel: `v8.serialize(null)` with its length crashed the
// server, a 4 GB length header was buffered (every later answer waited behind it), and forged
// replies answered other tenants' checks. Now each sandbox runs one tenant's code and its bytes are
// hostile input: the frame breaks the protocol, that sandbox is killed, and nothing else changes.
import { describe, expect, it, beforeAll } from "vitest";
import { serverForFile } from "../helpers/quiver.js";
import { addColumn, escaping, jsColumn, post, sleep, TENANT_KEYS, twoTenants, W1, W2 } from "../helpers/sandbox.js";
import { paced } from "../helpers/pace.js";

const q = serverForFile({ args: ["--udf-timeout-ms", "2000", "--workers", "2"], env: { QUIVER_API_KEYS: TENANT_KEYS } });
beforeAll(() => twoTenants(q));

/** Node's IPC frame of `value` (advanced serialization: a big-endian u32 length, then v8.serialize). */
const nodeIpcFrame = (value: string) => `const b = p.getBuiltinModule("v8").serialize(${value}); const h = B.alloc(4); h.writeUInt32BE(b.length); return B.concat([h, b]);`;

const frames: [string, string][] = [
  ["v8.serialize(null) with its length", nodeIpcFrame("null")],
  ["the bytes [0,0,0,1,255]", "return B.from([0, 0, 0, 1, 255]);"],
  ["a truncated frame (3 bytes of a length)", "return B.from([16, 0, 0]);"],
  ["a 4 GB length header", "return B.concat([B.from([255, 255, 255, 255, 2]), B.alloc(64)]);"],
];

/** ns2's checks give their own verdicts, promptly: a good UDF is added, a bad one is a 400 with its own error. */
async function ns2Answers(): Promise<void> {
  const good = await addColumn(q, "ns2$t", jsColumn("(x) => String(x)"), W2, 20_000);
  expect(good.status, good.text).toBe(200);
  expect(good.ms).toBeLessThan(paced(5_000));
  const bad = await addColumn(q, "ns2$t", jsColumn('(() => { const t = Date.now(); while (Date.now() - t < 300); throw new Error("ns2 own verdict"); })()'), W2, 20_000);
  expect(bad.status, bad.text).toBe(400);
  expect(bad.json.detail).toMatch(/ns2 own verdict/);
}

describe("raw frames an escaped UDF of ns1 writes to fd 3", () => {
  for (const [what, bytes] of frames) {
    it(`${what}: the server stays up, ns2's checks answer their own verdicts, ns1 gets a fresh sandbox`, async () => {
      const attack = escaping(`const bytes = (() => { ${bytes} })(); fs.writeSync(3, bytes); leak = "wrote " + bytes.length;`);
      const r = await addColumn(q, "ns1$t", jsColumn(attack), W1, 20_000);
      expect([200, 400]).toContain(r.status);
      await sleep(300);
      expect((await q.call("GET", "/healthz")).status).toBe(200);
      expect(q.proc.exitCode).toBeNull();
      await ns2Answers();
      // ns1's next check finds its bytes in a sandbox that breaks the protocol (killed, its task a
      // 400 that says so) or a fresh one; either way it is answered, and the one after works.
      const again = await addColumn(q, "ns1$t", jsColumn("(x) => String(x)"), W1, 60_000);
      expect([200, 400]).toContain(again.status);
      if (again.status === 400) expect(again.json.detail).toMatch(/broke its channel's protocol|sandbox was stopped/);
      expect((await addColumn(q, "ns1$t", jsColumn("(x) => String(x)"), W1, 60_000)).status).toBe(200);
    });
  }

  it("forged replies for every id (Node's IPC format), written while ns2's checks run, answer none of them", async () => {
    // Before, task ids were 0, 1, 2...: ns1's code, busy on one thread writing a reply for each of
    // the first 300 ids, answered whichever check ns2 had in flight on the other.
    const forge = `const v8 = p.getBuiltinModule("v8"); const frame = (v) => { const b = v8.serialize(v); const h = B.alloc(4); h.writeUInt32BE(b.length); return B.concat([h, b]); };
      const all = B.concat(Array.from({ length: 300 }, (_, id) => frame({ type: "reply", id, ok: true })));
      const end = Date.now() + 3000; while (Date.now() < end) { try { fs.writeSync(3, all); } catch {} } leak = "forged";`;
    const attacked = addColumn(q, "ns1$t", jsColumn(escaping(forge)), W1, 30_000);
    await sleep(300);
    await ns2Answers();
    expect([200, 400]).toContain((await attacked).status);
    expect(q.proc.exitCode).toBeNull();
  });
});
