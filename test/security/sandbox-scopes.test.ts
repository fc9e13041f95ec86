// Row 10 of the attack on request costs: keys limited to `ns3$a` and `ns3$b` shared one compute
// sandbox (its tenant was the top-level namespace, `ns3`), so `ns3$a`'s escaped code read `ns3$b`'s
// UDF source and changed its checks' verdicts. Now the server's sandbox for a credential's code is
// keyed by the credential's own prefix (src/auth/principal.ts, sandboxScope).
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, DEFAULT_KEYS, serverForFile } from "../helpers/quiver.js";
import { addColumn, escaping, jsColumn, post, rows, sleep } from "../helpers/sandbox.js";

const KA = "k-ns3a";
const KB = "k-ns3b";
const q = serverForFile({ args: ["--workers", "1", "--udf-timeout-ms", "3000"], env: { QUIVER_API_KEYS: `${DEFAULT_KEYS},${KA}:write:ns3$a,${KB}:write:ns3$b` } });
beforeAll(async () => {
  for (const ns of ["ns3", "ns3$a", "ns3$b"]) expect((await post(q, `/v1/namespace/${ns}/create`, {}, ADMIN_KEY)).status).toBe(200);
  for (const [t, key] of [["ns3$a$t", KA], ["ns3$b$t", KB]]) expect((await post(q, `/v1/table/${t}/create`, rows(5), key)).status).toBe(200);
}, 120_000);

// Escaped into its sandbox's worker, the code wraps the `vm.compileFunction` that every later
// check there compiles its UDF with: a source marked MARK_B is refused, quoting it.
const HOOK = escaping(
  'const vm = p.getBuiltinModule("vm"); const compile = vm.compileFunction; vm.compileFunction = function (code, ...rest) { if (String(code).includes("MARK_B")) throw new Error("ns3$a read: " + String(code).slice(0, 120)); return compile.call(this, code, ...rest); }; leak = "hooked";',
);

describe("keys limited to ns3$a and ns3$b", () => {
  it("never share a sandbox: ns3$a's escaped code neither reads ns3$b's UDF source nor changes its check's verdict", { timeout: 120_000 }, async () => {
    const a = await addColumn(q, "ns3$a$t", jsColumn(HOOK), KA, 60_000);
    expect(a.status, a.text).toBe(200);
    // The hook is set once the check's import() has been refused, just after its answer.
    await sleep(500);
    const b = await addColumn(q, "ns3$b$t", jsColumn('(x) => "MARK_B" + String(x)'), KB, 60_000);
    expect(b.text).not.toContain("ns3$a read");
    expect(b.status, b.text).toBe(200);
    // The hook still holds in ns3$a's own sandbox (the attack did run): a marked source there is refused.
    const own = await addColumn(q, "ns3$a$t", jsColumn('(x) => "MARK_B" + String(x)'), KA, 60_000);
    expect(own.status, own.text).toBe(400);
    expect(own.text).toContain("ns3$a read");
  });
});
