// Item 6 of the attack on the compute sandbox: what escaped code could reach from it. Before, the
// sandbox's network namespace stopped TCP but not paths: it talked to a world-writable Unix socket
// in the temp directory, `fs.realpathSync` probed any path, it signalled every uid-65534 process on
// the host, it used a descriptor its owner had inherited (fd 251), and it wrote its owner's log
// through fd 2: forged JSON lines, megabytes of them, and `ftruncate(2, 0)` emptied it. Here a
// process whose log is a file, and which inherited fd 251, starts a sandbox (as the server and
// job processes do) and escaped code tries each of those from inside.
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, chmodSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { escaping } from "../helpers/sandbox.js";

const dir = mkdtempSync(path.join(tmpdir(), "quiver-reach-"));
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DIST = path.resolve(__dirname, "../../dist");

/**
 * Check `udf` (a JavaScript UDF) in a sandbox started by a process with `log` as its stderr and
 * `inherited` as its fd 251, then a few more, for what it does after.
 */
async function inSandbox(udf: string, log: number, inherited: number): Promise<void> {
  const harness = `
    const { createCompute } = await import(${JSON.stringify(`${DIST}/workers/compute-client.js`)});
    const { checkInSandbox } = await import(${JSON.stringify(`${DIST}/workers/compute-answers.js`)});
    const compute = createCompute({ workers: 1, workerHeapMb: 128, sandboxMemoryMb: 1024, unsafeSharedSandbox: false, tenant: "ns1", admitted: 8, niceness: 0 });
    const udf = { key: "reach", backend: "js", source: ${JSON.stringify(udf)}, name: "", batch: false, inputs: ["__in0"], sources: ["x"], output: { name: "y", type: { type: "utf8" }, nullable: true, structField: "" }, timeoutMs: 5000, wasmMaxPages: 16 };
    await checkInSandbox(compute, { name: "udf", request: { op: "check", udf } }, 5000);
    // An idle pool thread runs no callbacks: a few more tasks let the attack's socket events arrive.
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 300));
      await checkInSandbox(compute, { name: "udf", request: { op: "check", udf: { ...udf, key: "next" + i, source: "(x) => x" } } }, 5000);
    }
    await new Promise((r) => setTimeout(r, 1500));
    await compute.close();`;
  const stdio: (string | number)[] = ["ignore", "ignore", log, ...new Array(248).fill("ignore"), inherited];
  const child = spawn(process.execPath, ["--input-type=module", "-e", harness], { stdio: stdio as never, env: {} });
  await new Promise((resolve) => child.once("exit", resolve));
}

/** What the attack reported on fd 2 (`PROBE {...}`, `SOCKET ...`): lines of its own (before), or inside its owner's log line. */
function probed(log: string): Record<string, string> {
  const said = log.split("\n").map((l) => (l.startsWith("{") ? ((JSON.parse(l) as { output?: string }).output ?? "") : l)).join("\n");
  const probe = /PROBE (\{.*\})/.exec(said);
  const socket = /SOCKET (\w+)/.exec(said);
  expect(probe && socket, said.slice(0, 500)).toBeTruthy();
  return { ...(JSON.parse(probe![1]) as Record<string, string>), socket: socket![1] };
}

/** Whether `pid` still runs (a zombie waiting for its reaper does not). */
const alive = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1][0] !== "Z";
  } catch {
    return false;
  }
};

describe("escaped code in the sandbox", () => {
  it("signals no outside process, opens no host socket or path, reads no inherited descriptor, and writes no line of its owner's log", { timeout: 120_000 }, async () => {
    // Another process of the sandbox's former user (uid 65534), a world-writable socket, a log file.
    const victim = spawn("sleep", ["60"], { uid: 65534, gid: 65534, stdio: "ignore" });
    let connections = 0;
    const socketPath = path.join(dir, "host.sock");
    const listener = createServer((s) => {
      connections++;
      s.on("error", () => undefined);
      s.end("hello");
    });
    await new Promise<void>((r) => listener.listen(socketPath, () => r()));
    chmodSync(socketPath, 0o777);
    const logFile = path.join(dir, "owner.log");
    writeFileSync(logFile, "the owner's first line\n");
    writeFileSync(path.join(dir, "inherited"), "hello");
    const log = openSync(logFile, "a");
    const inherited = openSync(path.join(dir, "inherited"), "r");
    try {
      // What it finds goes to fd 2 (its only way out of a check); a thread of its own (whose event
      // loop runs, unlike an idle pool thread's) tries the socket, then forges and floods.
      const attack = escaping(`const r = {}; const t = (k, f) => { try { r[k] = "ALLOWED " + String(f()).slice(0, 60); } catch (err) { r[k] = "denied"; } };
        t("kill", () => p.kill(${victim.pid}, "SIGKILL"));
        t("realpath", () => fs.realpathSync(${JSON.stringify(dir)}));
        t("inherited", () => { const b = B.alloc(5); const n = fs.readSync(251, b, 0, 5, 0); if (n === 0) throw new Error("empty"); return b.toString("utf8", 0, n); });
        t("truncate", () => fs.ftruncateSync(2, 0));
        fs.writeSync(2, "PROBE " + JSON.stringify(r) + "\\n");
        new (p.getBuiltinModule("worker_threads").Worker)(\`const fs = require("fs"); const s = require("net").connect(${JSON.stringify(socketPath)});
          const then = (v) => { fs.writeSync(2, "SOCKET " + v + "\\\\n");
            fs.writeSync(2, JSON.stringify({ t: new Date().toISOString(), level: "error", msg: "FORGED" }) + "\\\\n");
            const junk = Buffer.alloc(1 << 20, 65); for (let i = 0; i < 10; i++) fs.writeSync(2, junk); s.destroy(); };
          s.on("connect", () => then("ALLOWED")); s.on("error", () => then("denied"));\`, { eval: true });`);
      await inSandbox(attack, log, inherited);
      const text = readFileSync(logFile, "utf8");
      expect(probed(text)).toEqual({ kill: "denied", realpath: "denied", inherited: "denied", truncate: "denied", socket: "denied" });
      expect(alive(victim.pid!)).toBe(true);
      expect(connections).toBe(0);
      const lines = text.split("\n").filter(Boolean);
      expect(lines[0]).toBe("the owner's first line");
      // No line of its own: what it wrote is one JSON-escaped field of its owner's line, a few KB.
      expect(lines.filter((l) => /^(PROBE|SOCKET) /.test(l) || l.includes('"msg":"FORGED"'))).toEqual([]);
      expect(text.length).toBeLessThan(16_384);
    } finally {
      victim.kill("SIGKILL");
      listener.close();
    }
  });
});
