// Untrusted code (js, python and wasm UDFs, udtf and chunker bodies) against a real server holding
// API keys: every way out of the node:vm context that reaches the host realm's `Function` lands in
// the compute sandbox process, which holds no key, cannot write files, spawn processes, load addons
// or reach the network; thrown values stay under the time limit. Python, views, wasm and the
// sandbox process itself: sandbox-escape-backends.test.ts.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { assertClean, attempt, escapeServer, EXPLOIT, jsColumn } from "../helpers/escapes.js";
import { paced } from "../helpers/pace.js";

const { marks, post, table, addColumn, backfill, columnText } = escapeServer();

describe("a js virtual column that escapes the vm context", () => {
  it("the issue's exploit, backfilled and queried: no key material, no uid=", { timeout: 240_000 }, async () => {
    const t = await table(20);
    expect((await addColumn(t, jsColumn(EXPLOIT))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status, JSON.stringify(done.properties)).toBe("Succeeded");
    assertClean(await columnText(t));
  });

  it("a write at add_columns time (the check runs the source) leaves no file", async () => {
    const t = await table(5);
    const file = path.join(marks, "add-columns");
    const udf = `(() => { let leak; const F = (async () => {}).constructor; import("x").catch((e) => { const F = e.constructor.constructor; ${attempt(file)} }); return (x) => String(leak); })()`;
    await addColumn(t, jsColumn(udf));
    await new Promise((r) => setTimeout(r, 500));
    assertClean("", file);
  });

  // Every object the source can hold that might come from the host realm.
  const vias: [string, string][] = [
    ["the import() error", 'import("x").catch((e) => { const F = e.constructor.constructor; BODY });'],
    ["an input value", "self = (x) => { try { const F = x.constructor.constructor; BODY } catch {} return String(leak); };"],
    ["a caught TypeError", "try { null.x; } catch (e) { const F = e.constructor.constructor; BODY }"],
    ["a promise", "const F = Promise.resolve().constructor.constructor; BODY"],
    ["an iterator", "const F = [][Symbol.iterator]().constructor.constructor; BODY"],
    ["arguments", "(function () { const F = arguments.constructor.constructor; BODY })();"],
    ["a generator", "const F = (function* () {}).constructor.constructor; BODY"],
    ["an async function", "const F = (async () => {}).constructor; BODY"],
    ["a stack-trace hook", "try { Error.prepareStackTrace = (e, s) => s; const s = new Error().stack; const F = s[0].getFunction().constructor; BODY } catch (e) { try { Error.captureStackTrace({}); } catch {} }"],
    ["a Proxy's traps", "const P = new Proxy({}, { get: (o, k, r) => { try { const F = r.constructor.constructor; BODY } catch {} return undefined; } }); P.x;"],
  ];
  for (const [name, via] of vias) {
    it(`constructor.constructor through ${name}: no secret, no file, no process`, { timeout: 240_000 }, async () => {
      const t = await table(10);
      const file = path.join(marks, name.replace(/\W+/g, "-"));
      const udf = `(() => { let leak = "none"; let self = null; try { ${via.replace("BODY", attempt(file))} } catch (e) {} return self ?? ((x) => String(leak)); })()`;
      const added = await addColumn(t, jsColumn(udf));
      if (added.status === 200) {
        const done = await backfill(t);
        if (done.status === "Succeeded") assertClean(await columnText(t), file);
        else assertClean(JSON.stringify(done.properties), file);
      } else {
        expect(added.status).toBe(400);
        assertClean(added.text, file);
      }
    });
  }

  it("results with Symbol.toPrimitive, toJSON, getters and Proxies: the job fails or stores plain values, nothing leaks", { timeout: 240_000 }, async () => {
    const t = await table(10);
    const file = path.join(marks, "results");
    const hook = `() => { const F = (async () => {}).constructor; let leak; ${attempt(file)} return leak; }`;
    const udf = `(x) => { const h = ${hook}; return [{ [Symbol.toPrimitive]: h, toJSON: h, toString: h }, { get length() { return h(); } }, new Proxy({}, { get: h })][Math.floor(x) % 3]; }`;
    expect((await addColumn(t, jsColumn(udf))).status).toBe(200);
    const done = await backfill(t);
    expect(done.status).toBe("Failed");
    assertClean(JSON.stringify(done.properties), file);
  });

  it("a thrown getter at compile time ends within the time limit with a clear 400", async () => {
    const t = await table(5);
    const started = Date.now();
    const r = await addColumn(t, jsColumn("(() => { throw Object.create(Error.prototype, { message: { get() { for (;;); } }, code: { get() { for (;;); } } }); })()"));
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/ran longer than 1000 ms/);
    expect(Date.now() - started).toBeLessThan(paced(20_000));
  });

  it("a memory bomb at definition ends as a clear 400, and the server keeps serving", async () => {
    const t = await table(5);
    const r = await addColumn(t, jsColumn("(() => { const a = []; for (;;) a.push(new Array(1e6).fill(1)); })()"));
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatch(/ran out of memory|ran longer than 1000 ms/);
    expect((await post(`/v1/table/${t}/count_rows`, {})).json).toBe(5);
  });
});
