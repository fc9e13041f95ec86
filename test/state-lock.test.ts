// The state directory's lock (src/util/state-lock.ts) is a socket the kernel releases when the
// process ends: a predecessor that lingers as a zombie, or a PID file left naming some live
// process, or a live process still holding a removed directory whose inode number a new one got,
// never blocks a start, and of two starts at once on one state directory exactly one runs.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { expect, it } from "vitest";
import { V8_FLAGS } from "../src/util/v8-flags.js";
import { ADMIN_KEY, removeDir, serverEnv, startQuiver, tempDataDir } from "./helpers/quiver.js";

const MAIN = path.resolve(__dirname, "../dist/src/main.js");

const stateOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];

async function until(check: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

it.runIf(process.platform === "linux")("a server whose predecessor on the state directory is a zombie (killed, never reaped) starts", async () => {
  const dir = tempDataDir();
  // The server is the child of a shell that then becomes `sleep`, which never waits for it: once
  // killed it stays a zombie, its PID live to kill(pid, 0), as under a parent that never reaps.
  const cmd = `${[process.execPath, ...V8_FLAGS, MAIN, "--port", "0", "--data-dir", dir].map((a) => `'${a}'`).join(" ")} & echo "pid $!"; exec sleep 600`;
  const parent = spawn("sh", ["-c", cmd], { env: serverEnv({}), stdio: ["ignore", "pipe", "ignore"] });
  let out = "";
  parent.stdout!.on("data", (d) => (out += d));
  try {
    await until(() => /listening on/.test(out), "the first server");
    const pid = Number(/pid (\d+)/.exec(out)![1]);
    process.kill(pid, "SIGKILL");
    await until(() => stateOf(pid) === "Z", `process ${pid} to be a zombie`);
    const next = await startQuiver({ dataDir: dir });
    expect((await next.call("GET", "/v1/namespace/%24/list")).status).toBe(200);
    expect(stateOf(pid)).toBe("Z");
    await next.stop();
  } finally {
    parent.kill("SIGKILL");
    removeDir(dir);
  }
});

it("a PID file left in the state directory naming a live process (an older version's lock) does not block a start", async () => {
  const dir = tempDataDir();
  mkdirSync(path.join(dir, ".quiver"), { recursive: true });
  writeFileSync(path.join(dir, ".quiver", "replica.pid"), String(process.pid));
  try {
    const q = await startQuiver({ dataDir: dir });
    expect((await q.call("GET", "/v1/namespace/%24/list")).status).toBe(200);
    await q.stop();
  } finally {
    removeDir(dir);
  }
});

it("two starts at once on one state directory: exactly one runs, the other exits 1 with one line naming the holder", async () => {
  const dir = tempDataDir();
  const start = () => {
    const p = spawn(process.execPath, [...V8_FLAGS, MAIN, "--port", "0", "--data-dir", dir], { env: serverEnv({}), stdio: ["ignore", "pipe", "pipe"] });
    const r = { p, out: "", err: "", code: undefined as number | null | undefined };
    p.stdout!.on("data", (d) => (r.out += d));
    p.stderr!.on("data", (d) => (r.err += d));
    p.on("exit", (c) => (r.code = c));
    return r;
  };
  const both = [start(), start()];
  try {
    await until(() => both.some((r) => r.code !== undefined) && both.some((r) => /listening on/.test(r.out)), "one start to end and one to listen");
    const [runs, refused] = /listening on/.test(both[0].out) ? both : [both[1], both[0]];
    expect(refused.code).toBe(1);
    expect(refused.out).not.toMatch(/listening on/);
    expect(refused.err.trim().split("\n")).toEqual([`quiver: the state directory ${path.join(dir, ".quiver")} is in use by process ${runs.p.pid}: give each replica its own --state-dir`]);
    const port = /listening on http:\/\/[^:]+:(\d+)/.exec(runs.out)![1];
    const r = await fetch(`http://127.0.0.1:${port}/v1/namespace/%24/list`, { headers: { "x-api-key": ADMIN_KEY } });
    expect(r.status).toBe(200);
  } finally {
    for (const r of both) if (r.code === undefined) r.p.kill("SIGTERM");
    await until(() => both.every((r) => r.code !== undefined), "both to exit");
    removeDir(dir);
  }
});

it("a state directory made where a live process's was removed (its inode number reused) is not that process's: a start there runs", async () => {
  const dir = tempDataDir();
  const data = tempDataDir();
  // A process that holds the lock of each directory it is given (a line on stdin each) and lives on.
  const lock = pathToFileURL(path.resolve(__dirname, "../dist/src/util/state-lock.js")).href;
  const holder = spawn(
    process.execPath,
    ["--input-type=module", "-e", `const { lockStateDir } = await import(${JSON.stringify(lock)}); process.stdin.setEncoding("utf8").on("data", async (d) => { for (const l of d.split("\\n").filter(Boolean)) { await lockStateDir(l); console.log("held"); } }); setInterval(() => {}, 1000);`],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  let held = 0;
  holder.stdout!.on("data", (d) => (held += String(d).split("held").length - 1));
  try {
    // ext4 (this project's CI) hands a freed inode number to the next directory made, but a test
    // file running beside this one may make one first: then the holder locks the new directory too,
    // and it is removed and made again, until it comes back with the inode number of one held.
    let reused = false;
    for (let tries = 0; tries < 20 && !reused; tries++) {
      holder.stdin!.write(`${dir}\n`);
      await until(() => held === tries + 1, "the holder to lock");
      const old = statSync(dir);
      rmdirSync(dir);
      mkdirSync(dir);
      reused = statSync(dir).ino === old.ino;
    }
    expect(reused, "a new directory got a held directory's inode number").toBe(true);
    const next = await startQuiver({ dataUri: data, dataDir: dir });
    expect((await next.call("GET", "/v1/namespace/%24/list")).status).toBe(200);
    expect(holder.exitCode).toBeNull();
    await next.stop();
  } finally {
    holder.kill("SIGKILL");
    removeDir(dir);
    removeDir(data);
  }
});
