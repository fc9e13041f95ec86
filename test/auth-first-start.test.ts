// The first start without configured credentials generates an admin key and prints it once on the
// server process's stdout (the rest of the credential tests run in process: test/auth.test.ts).
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { removeDir, request, startQuiver, tempDataDir } from "./helpers/quiver.js";

/**
 * Every file's bytes under `dir`, as one string. The server is running: a file listed may be gone
 * when read (Lance writes a manifest under a temporary name, then renames it), and the renamed one
 * is read on the next pass.
 */
function allBytes(dir: string): string {
  const read = (file: string) => {
    try {
      return readFileSync(file, "latin1");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
      throw err;
    }
  };
  const pass = () =>
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => read(path.join(e.parentPath, e.name)))
      .join("");
  return pass() + pass();
}

describe("first start without configured credentials", () => {
  it("generates an admin key, prints it once, stores only its hash plus a 0600 key file", async () => {
    const first = await startQuiver({ noKeys: true, env: { QUIVER_API_KEYS: "" } });
    const printed = /generated admin API key[^\n]*\n\s+(\S+)/.exec(first.stdout())?.[1];
    expect(printed).toBeTruthy();
    const keyFile = path.join(first.dataDir, ".quiver", "admin.key");
    expect(readFileSync(keyFile, "utf8").trim()).toBe(printed);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    // The shared store holds its hash only.
    expect(allBytes(path.join(first.dataDir, ".system"))).not.toContain(printed!);
    expect((await request(`${first.url}/v1/namespace/%24/list`, "GET", undefined, { "x-api-key": printed! })).status).toBe(200);
    expect(first.stderr()).not.toContain(printed!);
    expect(await first.stop()).toBe(0);

    const second = await startQuiver({ noKeys: true, env: { QUIVER_API_KEYS: "" }, dataDir: first.dataDir });
    expect(second.stdout()).not.toContain(printed!);
    expect(second.stdout()).not.toContain("generated");
    expect((await request(`${second.url}/v1/namespace/%24/list`, "GET", undefined, { "x-api-key": printed! })).status).toBe(200);
    await second.stop();
    removeDir(first.dataDir);
  });
});

describe("replicas starting at once on a fresh data directory", () => {
  it("agree on one generated admin key: only the replica that stored its hash prints it and writes admin.key", async () => {
    const dataDir = tempDataDir();
    const states = [0, 1, 2].map(() => mkdtempSync(path.join(tmpdir(), "quiver-state-")));
    const env = { QUIVER_API_KEYS: "" };
    const replicas = await Promise.all(states.map((s) => startQuiver({ noKeys: true, env, dataDir, args: ["--state-dir", s] })));
    const printed = replicas.map((r) => /generated admin API key[^\n]*\n\s+(\S+)/.exec(r.stdout())?.[1]).filter(Boolean);
    expect(printed).toHaveLength(1);
    expect(states.filter((s) => existsSync(path.join(s, "admin.key")))).toHaveLength(1);
    for (const r of replicas) expect((await request(`${r.url}/v1/namespace/%24/list`, "GET", undefined, { "x-api-key": printed[0]! })).status).toBe(200);
    await Promise.all(replicas.map((r) => r.stop()));
    for (const d of [dataDir, ...states]) removeDir(d);
  });
});
