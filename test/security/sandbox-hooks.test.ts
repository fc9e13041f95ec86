// Item 5 of the attack on the compute sandbox, its quietest part: escaped code that hooks what the
// sandbox's next tasks go through. Before, ns1's code replaced `vm.compileFunction` and read ns2's
// next UDF source (API_TOKEN=sk-live-123) in its own 400; in Python, `_user_builtins` was one
// writable dict per interpreter, and a hooked `__import__` saw ns2's module constants. Now ns2's
// code never runs in ns1's process or interpreter: the hooks stay in place and see nothing of it.
import { beforeAll, describe, expect, it } from "vitest";
import { serverForFile } from "../helpers/quiver.js";
import { addColumn, escaping, jsColumn, pyColumn, sleep, TENANT_KEYS, twoTenants, W1, W2 } from "../helpers/sandbox.js";

// One worker: before, every task of every tenant went through the one thread ns1 hooks.
const q = serverForFile({ args: ["--udf-timeout-ms", "20000", "--workers", "1"], env: { QUIVER_API_KEYS: TENANT_KEYS } });
beforeAll(() => twoTenants(q));

const SECRET = "sk-live-123";

describe("hooks that ns1's escaped code leaves in its sandbox", () => {
  it("a replaced vm.compileFunction sees none of ns2's sources", { timeout: 120_000 }, async () => {
    const hook = escaping(`const vm = p.getBuiltinModule("vm"); const orig = vm.compileFunction; const seen = [];
      vm.compileFunction = function (src, ...rest) { if (src.includes("REPORT")) throw new Error("seen: " + seen.join(" | ")); seen.push(src); return orig.call(this, src, ...rest); };
      leak = "hooked";`);
    expect((await addColumn(q, "ns1$t", jsColumn(hook), W1)).status).toBe(200);
    await sleep(300);
    const ns2 = await addColumn(q, "ns2$t", jsColumn(`(x) => { const API_TOKEN = "${SECRET}"; return String(x); }`), W2);
    expect(ns2.status, ns2.text).toBe(200);
    const report = await addColumn(q, "ns1$t", jsColumn("/* REPORT */ (x) => String(x)"), W1);
    expect(report.status).toBe(400);
    expect(report.json.detail).toMatch(/seen: /);
    expect(report.text).not.toContain(SECRET);
  });

  it("a hooked __import__ in the interpreter's builtins sees none of ns2's module constants", { timeout: 180_000 }, async () => {
    const hook = `imp = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "BuiltinImporter"][0].load_module("builtins").__import__
main = imp("sys").modules["__main__"]
seen = []
orig = main._user_builtins["__import__"]
def hook(name, globals=None, locals=None, fromlist=(), level=0):
    if globals and "API_TOKEN" in globals:
        seen.append(str(globals["API_TOKEN"]))
    if name == "REPORT":
        raise ImportError("seen: " + " | ".join(seen))
    return orig(name, globals, locals, fromlist, level)
main._user_builtins["__import__"] = hook
def f(x):
    return str(x)
`;
    const added = await addColumn(q, "ns1$t", pyColumn(hook, "f"), W1, 120_000);
    expect(added.status, added.text).toBe(200);
    const ns2 = await addColumn(q, "ns2$t", pyColumn(`API_TOKEN = "${SECRET}"\nimport math\ndef f(x):\n    return str(math.floor(x))`), W2, 120_000);
    expect(ns2.status, ns2.text).toBe(200);
    const report = await addColumn(q, "ns1$t", pyColumn("import REPORT\ndef f(x):\n    return str(x)"), W1, 120_000);
    expect(report.status).toBe(400);
    expect(report.json.detail).toMatch(/seen: /);
    expect(report.text).not.toContain(SECRET);
  });
});
