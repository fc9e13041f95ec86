// The README's curl session, run exactly as written (only the address is this server's) against a
// fresh server that generated its own admin key, from a directory where `data` is its data directory.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { serverForFile } from "./helpers/quiver.js";

const q = serverForFile({ noKeys: true });
const work = mkdtempSync(path.join(tmpdir(), "quiver-readme-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function session(): string {
  const readme = readFileSync(path.resolve(__dirname, "../README.md"), "utf8");
  const from = readme.indexOf("### A first session with curl");
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from));
  if (from < 0 || !block) throw new Error("README has no curl session");
  return block[1];
}

describe("README: a first session with curl", () => {
  it("runs as written: every command succeeds and answers what the README says", async () => {
    symlinkSync(q.dataDir, path.join(work, "data"));
    const script = session().replaceAll("localhost:8080", `127.0.0.1:${q.port}`);
    writeFileSync(path.join(work, "session.sh"), script);
    const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "session.sh"], { cwd: work, timeout: 60_000 });
    const lines = stdout.trim().split("\n");
    expect(stdout).not.toContain('"/errors/');
    expect(lines.length).toBe(9);
    const [nsCreated, created, inserted, nearest, filtered, indexing, text, versions, countAtV1] = lines.map((l) => JSON.parse(l));
    expect(nsCreated).toEqual({ properties: { owner: "me" } });
    expect(created.version).toBe(1);
    expect(inserted).toEqual({ version: 2, num_inserted_rows: 2 });
    expect(nearest.map((r: { id: number }) => r.id)).toEqual([1, 3]);
    expect(filtered.map((r: { id: number }) => r.id).sort()).toEqual([1, 3, 4]);
    expect(indexing.transaction_id).toEqual(expect.any(String));
    expect(text.map((r: { id: number }) => r.id).sort()).toEqual([1, 3]);
    expect(versions.versions.map((v: { version: number }) => v.version)).toEqual([1, 2, 3]);
    expect(countAtV1).toBe(2);
  });
});
