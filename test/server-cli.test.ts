// The server's command line: --help lists every option of the one option table with its variable
// and default, --version prints the version, and a QUIVER_* variable naming no option is warned
// about at start instead of being ignored without a word.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { options } from "../src/config.js";
import { logLine, removeDir, startQuiver } from "./helpers/quiver.js";

const MAIN = path.resolve(__dirname, "../dist/src/main.js");
const VERSION = (JSON.parse(readFileSync(path.resolve(__dirname, "../package.json"), "utf8")) as { version: string }).version;
const run = (...args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: "utf8", timeout: 30_000 });

describe("quiver's command line", () => {
  it("--help: every option as a flag with its QUIVER_* variable and default, and exit 0 without starting", () => {
    const r = run("--help");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.startsWith(`quiver ${VERSION}`)).toBe(true);
    for (const o of options) {
      const variable = `QUIVER_${o.key.toUpperCase().replace(/-/g, "_")}`;
      expect(r.stdout, o.key).toMatch(new RegExp(`^  --${o.key}( VALUE| N)?   ${variable}`, "m"));
      if (typeof o.def === "number" && o.key !== "workers") expect(r.stdout, o.key).toContain(`${variable} (default ${o.def})`);
    }
    expect(r.stdout).not.toMatch(/listening on http/);
  });

  it("--version prints the version and exits 0", () => {
    const r = run("--version");
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`quiver ${VERSION}\n`);
  });

  it("warns at start about a QUIVER_* variable that names no option (a typo), and names it", async () => {
    const q = await startQuiver({ env: { QUIVER_SERVNG: "off" } });
    try {
      const line = await logLine(q, (l) => l.includes("QUIVER_SERVNG"));
      expect(JSON.parse(line)).toMatchObject({ level: "warn", variables: ["QUIVER_SERVNG"] });
    } finally {
      await q.stop();
      removeDir(q.dataDir);
    }
  });
});
