// HAProxy (Debian's package) in front of Quiver replicas, for the multi-replica tests and bench:
// the documented configuration (docs/haproxy.cfg) with local ports from the OS, in a temp
// directory, `haproxy -f cfg -db` in the foreground, stopped after.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const HAPROXY = "/usr/sbin/haproxy";

const here = path.dirname(fileURLToPath(import.meta.url));

/** A free TCP port on 127.0.0.1, as the OS picks it. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** docs/haproxy.cfg, from this module's place in the sources (vitest) or in dist/ (the benches). */
const DOCUMENTED = [path.resolve(here, "../docs/haproxy.cfg"), path.resolve(here, "../../docs/haproxy.cfg")].find((p) => existsSync(p))!;

/**
 * How fast HAProxy checks readiness: `documented` as docs/haproxy.cfg says (every 2 s, out after
 * 3 failures, back after 2 successes); `fast` every 100 ms, out after one failure (a killed
 * replica refuses at once and leaves within ~100 ms), back after one success.
 */
export type Checks = "documented" | "fast";

/**
 * The configuration of docs/haproxy.cfg with this test's addresses: the frontend bound to
 * `front`, one `server rN` line per port of `servers`; a header naming the replica that answered
 * (for tests and benches that follow one replica's work) and a stats page on `stats`.
 */
export function haproxyConfig(front: number, stats: number, servers: number[], checks: Checks = "fast"): string {
  const lines = readFileSync(DOCUMENTED, "utf8").split("\n");
  const out: string[] = [];
  for (const line of lines) {
    if (/^\s+server /.test(line)) continue;
    if (/^\s+bind /.test(line)) out.push(`  bind 127.0.0.1:${front}`, "  http-response set-header x-quiver-replica %s");
    else if (/^\s+default-server /.test(line) && checks === "fast") out.push("  default-server inter 100ms fastinter 100ms downinter 100ms fall 1 rise 1");
    else out.push(line);
  }
  const backend = out.findIndex((l) => l.startsWith("backend "));
  const end = out.findIndex((l, i) => i > backend && l.trim() === "");
  out.splice(end === -1 ? out.length : end, 0, ...servers.map((p, i) => `  server r${i} 127.0.0.1:${p} check`));
  return `${out.join("\n").trimEnd()}

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
export async function startHaproxy(ports: number[], checks: Checks = "fast"): Promise<Haproxy> {
  const work = mkdtempSync(path.join(tmpdir(), "quiver-haproxy-"));
  const [front, stats] = [await freePort(), await freePort()];
  const cfg = path.join(work, "haproxy.cfg");
  writeFileSync(cfg, haproxyConfig(front, stats, ports, checks));
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
