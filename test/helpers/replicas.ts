// Several Quiver replicas on one data directory (a local directory, or a container of Azurite
// started here) behind HAProxy, for the multi-replica tests: each replica has its own port and
// --state-dir and the same API keys; HAProxy balances round robin over them, takes a replica out of
// rotation as soon as its readiness check fails, and retries a request another replica only where
// that is safe. Ports come from the OS; everything is stopped, and removed, after the file.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { startAzurite, type Azurite } from "./azurite.js";
import { ADMIN_KEY, removeDir, request, startQuiver, tempDataDir, type Caller, type Quiver } from "./quiver.js";

export const HAPROXY = "/usr/sbin/haproxy";
/** The job lease the replicas run with: a replica that died gives its jobs up after this long. */
export const JOB_LEASE_MS = 3000;

export interface ReplicaOptions {
  replicas: number;
  store: "local" | "azurite";
  /** More flags for every replica. */
  args?: string[];
}

export interface Replicas extends Caller {
  /** The balancer: http://127.0.0.1:<port> */
  url: string;
  /** The replicas, in HAProxy's server order (r0, r1, …); an entry is replaced by restart(). */
  replicas: Quiver[];
  /** Where the data lives: the shared local directory, or the az:// URI. */
  dataUri: string;
  /** SIGKILL replica `i` (a crash); resolves once HAProxy no longer sends it requests. */
  kill(i: number): Promise<void>;
  /** Start replica `i` again on its port and state directory (after kill or stop), with `args` added; resolves once it is in rotation again. */
  restart(i: number, args?: string[]): Promise<void>;
  /** SIGTERM replica `i`, wait for its exit; answers the exit code. */
  stop(i: number): Promise<number | null>;
  /** HAProxy's view of each server: "UP", "DOWN", … by server name (r0, r1, …). */
  status(): Promise<Record<string, string>>;
}

/** A free TCP port on 127.0.0.1, as the OS picks it. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * HAProxy's configuration: round robin in HTTP mode; readiness checked every 100 ms (as HTTP/1.1:
 * the server answers HTTP/1.0, HAProxy's default check, with 505), one failure
 * takes a server out (a killed replica leaves within ~100 ms, a draining one at once), one success
 * brings it back. A connection that fails is retried on another server for every request (nothing
 * was sent); a request sent to a replica that died before answering is replayed only if replaying
 * it is harmless: a read, or a write under an Idempotency-Key (the replicas share those records).
 */
export function haproxyConfig(front: number, stats: number, servers: number[]): string {
  return `global
  maxconn 2048

defaults
  mode http
  timeout connect 1s
  timeout client 120s
  timeout server 120s
  timeout http-keep-alive 10s

frontend quiver
  bind 127.0.0.1:${front}
  default_backend replicas

backend replicas
  balance roundrobin
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr host quiver
  http-check expect status 200
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
  acl read_op path_end /query /count_rows /describe /exists /list /stats /healthz /readyz
  acl read_op method GET HEAD
  acl replayable req.hdr(idempotency-key) -m found
  http-request disable-l7-retry unless read_op || replayable
  default-server inter 100ms fastinter 100ms downinter 100ms fall 1 rise 1
${servers.map((p, i) => `  server r${i} 127.0.0.1:${p} check`).join("\n")}

frontend stats
  bind 127.0.0.1:${stats}
  stats enable
  stats uri /stats
`;
}

export function replicasForFile(opts: ReplicaOptions): Replicas {
  const bed = { replicas: [] as Quiver[] } as Replicas;
  let az: Azurite | undefined;
  let haproxy: ChildProcess | undefined;
  let haproxyOut = "";
  let work = "";
  let shared = "";
  const ports: number[] = [];
  const stateDirs: string[] = [];
  let storageArgs: string[] = [];
  const replicaArgs = (i: number, more: string[] = []) => ["--port", String(ports[i]), "--auto-maintenance", "off", ...(opts.args ?? []), ...storageArgs, ...more];

  // The lease goes by environment: a replica that does not know the option yet ignores it, where an
  // unknown flag would stop its start.
  const start = (i: number, more?: string[]) =>
    startQuiver({ dataUri: bed.dataUri, dataDir: stateDirs[i], args: replicaArgs(i, more), env: { QUIVER_JOB_LEASE_MS: String(JOB_LEASE_MS) } });

  const untilStatus = async (name: string, want: (s: string) => boolean, timeoutMs = 10_000) => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const s = (await bed.status())[name];
      if (want(s)) return;
      if (Date.now() > end) throw new Error(`haproxy server ${name} still ${s}\n${haproxyOut}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), "quiver-replicas-"));
    if (opts.store === "azurite") {
      az = await startAzurite();
      await az.createContainer("replicas");
      bed.dataUri = "az://replicas/quiver";
      storageArgs = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
    } else {
      shared = tempDataDir();
      bed.dataUri = shared;
    }
    for (let i = 0; i < opts.replicas; i++) {
      ports.push(await freePort());
      stateDirs.push(tempDataDir());
    }
    // All at once, as a deployment starts them: the first starts on an empty data directory race.
    bed.replicas.push(...(await Promise.all(ports.map((_, i) => start(i)))));

    const front = await freePort();
    const stats = await freePort();
    const cfg = path.join(work, "haproxy.cfg");
    writeFileSync(cfg, haproxyConfig(front, stats, ports));
    haproxy = spawn(HAPROXY, ["-f", cfg, "-db"], { stdio: ["ignore", "pipe", "pipe"] });
    haproxy.stdout!.on("data", (d) => (haproxyOut += d));
    haproxy.stderr!.on("data", (d) => (haproxyOut += d));
    bed.url = `http://127.0.0.1:${front}`;
    const statsUrl = `http://127.0.0.1:${stats}/stats;csv`;
    bed.status = async () => {
      const csv = await (await fetch(statsUrl)).text();
      const [head, ...lines] = csv.trim().split("\n");
      const cols = head.replace(/^# /, "").split(",");
      const [px, sv, st] = ["pxname", "svname", "status"].map((c) => cols.indexOf(c));
      return Object.fromEntries(lines.map((l) => l.split(",")).filter((f) => f[px] === "replicas" && /^r\d+$/.test(f[sv])).map((f) => [f[sv], f[st]]));
    };
    const end = Date.now() + 10_000;
    for (;;) {
      const s = await bed.status().catch(() => ({}) as Record<string, string>);
      if (Object.keys(s).length === opts.replicas && Object.values(s).every((x) => x === "UP")) break;
      if (haproxy.exitCode !== null || Date.now() > end) throw new Error(`haproxy did not come up:\n${haproxyOut}\n${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 120_000);

  bed.call = (method, p, body, headers) => request(bed.url + p, method, body, { "x-api-key": ADMIN_KEY, ...headers });
  bed.kill = async (i) => {
    await bed.replicas[i].kill();
    await untilStatus(`r${i}`, (s) => s.startsWith("DOWN"));
  };
  bed.stop = async (i) => {
    const code = await bed.replicas[i].stop();
    await untilStatus(`r${i}`, (s) => s.startsWith("DOWN") || s.startsWith("NOLB"));
    return code;
  };
  bed.restart = async (i, more) => {
    bed.replicas[i] = await start(i, more);
    await untilStatus(`r${i}`, (s) => s === "UP");
  };

  afterAll(async () => {
    await Promise.all(bed.replicas.map((q) => q?.stop()));
    if (haproxy && haproxy.exitCode === null) {
      const exited = new Promise((r) => haproxy!.once("exit", r));
      haproxy.kill("SIGTERM");
      await exited;
    }
    await az?.stop();
    for (const d of [...stateDirs, shared, work]) if (d) removeDir(d);
  }, 60_000);

  return bed;
}

/** The replicas (indexes into bed.replicas) whose process has a job child running `script` (e.g. "backfill.js") now. */
export function runningJobIn(bed: Replicas, script: string): number[] {
  const children = new Map<number, string[]>();
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      // The command's name may hold spaces and parentheses; the fields after its last ")" do not.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      children.set(ppid, [...(children.get(ppid) ?? []), ...cmd]);
    } catch {
      // The process ended while being read.
    }
  }
  return bed.replicas.flatMap((q, i) => (q.proc.exitCode === null && (children.get(q.proc.pid!) ?? []).some((a) => a.endsWith(`/${script}`)) ? [i] : []));
}
