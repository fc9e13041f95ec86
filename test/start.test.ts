// `npm start` runs the built server as it is: the build happens at install (`prepare`), not at
// every start, so an unchanged checkout starts without compiling anything; and node gets
// Quiver's V8 flags (src/util/v8-flags.ts), which only its command line can give.
import { spawn } from "node:child_process";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { removeDir } from "./helpers/quiver.js";

const root = path.resolve(__dirname, "..");

describe("npm start", () => {
  it("serves the built dist/ without rebuilding it, with Quiver's V8 flags", async () => {
    const built = path.join(root, "dist/src/main.js");
    const before = statSync(built).mtimeMs;
    const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-start-"));
    // Its own process group, so the server under npm is stopped with it.
    const npm = spawn("npm", ["start", "--silent", "--", "--port", "0", "--data-dir", dataDir], {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, QUIVER_API_KEYS: "k:admin", QUIVER_LOG_LEVEL: "warn" },
    });
    let out = "";
    npm.stdout!.on("data", (d) => (out += d));
    npm.stderr!.on("data", (d) => (out += d));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npm start did not serve:\n${out}`)), 60_000);
        npm.stdout!.on("data", () => {
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]);
          }
        });
        npm.on("exit", (code) => reject(new Error(`npm start exited with ${code}:\n${out}`)));
      });
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(out).not.toMatch(/tsc/);
      // A server started without them says so at warn level, the level this one runs at.
      expect(out).not.toContain("without Quiver's V8 flags");
      expect(statSync(built).mtimeMs).toBe(before);
    } finally {
      process.kill(-npm.pid!, "SIGTERM");
      await new Promise((r) => npm.once("exit", r));
      removeDir(dataDir);
    }
  });
});
