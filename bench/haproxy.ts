// HAProxy (Debian's package) in front of Quiver replicas, for the multi-replica tests and bench:
// a generated configuration in a temp directory, `haproxy -f cfg -db` in the foreground, ports
// from the OS, stopped after.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

export const HAPROXY = "/usr/sbin/haproxy";

/** A free TCP port on 127.0.0.1, as the OS picks it. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * Round robin in HTTP mode; readiness (/readyz) checked every 100 ms as HTTP/1.1 (the server
 * answers HTTP/1.0, HAProxy's default check, with 505), each allowed 2 s to answer; one failure
 * takes a server out (a killed replica refuses at once and leaves within ~100 ms, a draining one
 * answers 503), one success brings it back. A
 * connection that fails is retried on another server for every request (nothing was sent); a
 * request sent to a replica that died before answering is replayed only where that is harmless: a
 * read, or a write under an Idempotency-Key (the replicas share those records).
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
  # A check waits this long for /readyz (without it, HAProxy allows only \`inter\`, 100 ms, and a
  # replica busy for a moment on a loaded machine is taken out); a dead replica refuses at once.
  timeout check 2s

frontend quiver
  bind 127.0.0.1:${front}
  default_backend replicas
  # Which replica answered, for tests and benches that follow one replica's work.
  http-response set-header x-quiver-replica %s

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

export interface Haproxy {
  /** The balancer: http://127.0.0.1:<port> */
  url: string;
  /** Each server's state as HAProxy sees it ("UP", "DOWN", …), by name (r0, r1, …). */
  status(): Promise<Record<string, string>>;
  /** Resolves once server `name`'s state passes `want`. */
  untilStatus(name: string, want: (s: string) => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** HAProxy over servers on 127.0.0.1 at `ports` (named r0, r1, …); resolves once every one is UP. */
export async function startHaproxy(ports: number[]): Promise<Haproxy> {
  const work = mkdtempSync(path.join(tmpdir(), "quiver-haproxy-"));
  const [front, stats] = [await freePort(), await freePort()];
  const cfg = path.join(work, "haproxy.cfg");
  writeFileSync(cfg, haproxyConfig(front, stats, ports));
  const proc = spawn(HAPROXY, ["-f", cfg, "-db"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout!.on("data", (d) => (out += d));
  proc.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const statsUrl = `http://127.0.0.1:${stats}/stats;csv`;
  const status = async () => {
    const csv = await (await fetch(statsUrl)).text();
    const [head, ...lines] = csv.trim().split("\n");
    const cols = head.replace(/^# /, "").split(",");
    const [px, sv, st] = ["pxname", "svname", "status"].map((c) => cols.indexOf(c));
    return Object.fromEntries(lines.map((l) => l.split(",")).filter((f) => f[px] === "replicas" && /^r\d+$/.test(f[sv])).map((f) => [f[sv], f[st]]));
  };
  const untilStatus = async (name: string, want: (s: string) => boolean, timeoutMs = 10_000) => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const s = (await status().catch(() => ({}) as Record<string, string>))[name];
      if (s !== undefined && want(s)) return;
      if (proc.exitCode !== null || Date.now() > end) throw new Error(`haproxy server ${name} still ${s}:\n${out}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  for (let i = 0; i < ports.length; i++) await untilStatus(`r${i}`, (s) => s === "UP");
  return {
    url: `http://127.0.0.1:${front}`,
    status,
    untilStatus,
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      await exited;
      rmSync(work, { recursive: true, force: true });
    },
  };
}
