// One server per port: a second Quiver on a taken port fails with the reason and exits non-zero
// (uWS would otherwise share the port and split the connections), and `npm start` stops the
// server when the process manager sends SIGTERM to npm.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { DEFAULT_KEYS, logLine, removeDir, startQuiver, type Quiver } from "./helpers/quiver.js";

const ROOT = path.resolve(__dirname, "..");
const started: Quiver[] = [];
afterAll(async () => {
  for (const q of started) {
    await q.stop();
    removeDir(q.dataDir);
  }
});

it("a second Quiver on a taken port exits non-zero with `port N is in use by another Quiver server`; the first keeps all requests", async () => {
  const first = await startQuiver();
  started.push(first);
  const second = startQuiver({ args: ["--port", String(first.port)] });
  await expect(second).rejects.toThrow(new RegExp(`exited with 1:[\\s\\S]*quiver: port ${first.port} is in use by another Quiver server`));
  // Every request still reaches the first server's data directory.
  await first.call("POST", "/v1/namespace/only-here/create", {});
  for (let i = 0; i < 10; i++) expect((await first.call("POST", "/v1/namespace/only-here/exists", {})).status).toBe(200);
});

it("a port held by another program: `port N is in use by another program`, exit code 1", async () => {
  const other = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
  const port = (other.address() as net.AddressInfo).port;
  try {
    await expect(startQuiver({ args: ["--port", String(port)] })).rejects.toThrow(new RegExp(`exited with 1:[\\s\\S]*quiver: port ${port} is in use by another program`));
  } finally {
    other.close();
  }
});

it("`npm start` then SIGTERM to npm: the server drains and its process exits", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-test-"));
  const npm = spawn("npm", ["start", "--ignore-scripts", "--", "--port", "0", "--data-dir", dataDir], {
    cwd: ROOT,
    // No drain delay, as for every test server: what is checked is that SIGTERM reaches the server
    // through npm; the delay's own behaviour is test/lifecycle.test.ts's.
    env: { ...process.env, QUIVER_API_KEYS: DEFAULT_KEYS, QUIVER_LOG_LEVEL: "info", QUIVER_DRAIN_DELAY_MS: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  npm.stderr!.on("data", (d) => (err += d));
  const fake = { stderr: () => err } as Quiver;
  const startedLine = await logLine(fake, (l) => l.includes('"msg":"started"'), 60_000);
  const pid = JSON.parse(startedLine).pid as number;
  expect(pid).not.toBe(npm.pid);
  npm.kill("SIGTERM");
  await logLine(fake, (l) => l.includes('"msg":"stopping"'), 10_000);
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 100 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
  expect(alive()).toBe(false);
  removeDir(dataDir);
}, 90_000);
