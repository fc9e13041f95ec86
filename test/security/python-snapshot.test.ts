// The Python interpreter's memory snapshot (native/build-python-snapshot.mjs), which each compute
// sandbox thread restores at its first Python task: the build made it for the installed Pyodide,
// and nothing of the building process's environment is in it, since user code in the sandbox reads
// os.environ and the interpreter's memory.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "../..");
const { version } = JSON.parse(readFileSync(path.join(ROOT, "node_modules/pyodide/package.json"), "utf8")) as { version: string };

it("the build made the snapshot for the installed Pyodide version", () => {
  expect(existsSync(path.join(ROOT, "dist/native", `python-${version}.snapshot`))).toBe(true);
});

it("a snapshot built with secrets in the environment holds none of them, and restores to Pyodide's own environment", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(path.join(tmpdir(), "quiver-snapshot-"));
  try {
    const secret = `snapshot-secret-${randomUUID()}`;
    const env = { ...process.env, QUIVER_API_KEYS: `${secret}:admin`, AWS_SECRET_ACCESS_KEY: secret };
    execFileSync(process.execPath, [path.join(ROOT, "native/build-python-snapshot.mjs"), dir], { env, cwd: dir });
    const file = path.join(dir, `python-${version}.snapshot`);
    expect(readFileSync(file).includes(secret)).toBe(false);
    const restore = `import { loadPyodide } from "pyodide"; import { readFileSync } from "node:fs";
      const py = await loadPyodide({ _loadSnapshot: readFileSync(process.argv[1]) });
      console.log(py.runPython("import os, json\\njson.dumps(dict(os.environ))"));`;
    const seen = execFileSync(process.execPath, ["--input-type=module", "-e", restore, file], { cwd: ROOT }).toString();
    expect(seen).not.toContain(secret);
    expect(JSON.parse(seen)).toMatchObject({ HOME: "/home/pyodide" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
