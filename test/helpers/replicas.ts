// Several Quiver replicas on one data directory (a local directory, or a container of Azurite
// started here) behind HAProxy, for the multi-replica tests: each replica has its own port and
// --state-dir and the same API keys; HAProxy balances round robin over them, takes a replica out of
// rotation as soon as its readiness check fails (or as docs/haproxy.cfg says), and retries a request
// on another replica only where that is safe (bench/haproxy.ts). Ports come from the OS; everything is stopped, and removed,
// after the file.
import { afterAll, afterEach, beforeAll } from "vitest";
import { freePort, startHaproxy, type Checks, type Haproxy } from "../../bench/haproxy.js";
import { startAzurite, type Azurite } from "./azurite.js";
import { paced, SLOW_TEST_MS } from "./pace.js";
import { processesRunning, processTable } from "./processes.js";
import { ADMIN_KEY, removeDir, request, startQuiver, tempDataDir, type Caller, type Quiver } from "./quiver.js";

/** The job lease the replicas run with on an idle machine: a replica that died gives its jobs up after this long. */
export const JOB_LEASE_MS = 3000;
/** The replicas share this host's clock: a tight bound, so a lease is taken over 1 s after its grace rather than 4 s. */
export const MAX_CLOCK_SKEW_MS = 500;

export interface ReplicaOptions {
  replicas: number;
  store: "local" | "azurite";
  /** More flags for every replica. */
  args?: string[];
  /** More environment for every replica (over the test servers', test/helpers/quiver.ts). */
  env?: Record<string, string>;
  /** HAProxy's readiness checks (bench/haproxy.ts): `fast` unless told. */
  checks?: Checks;
}

export interface Replicas extends Caller {
  /** The balancer: http://127.0.0.1:<port> */
  url: string;
  /** The replicas, in HAProxy's server order (r0, r1, …); an entry is replaced by restart(). */
  replicas: Quiver[];
  /** Where the data lives: the shared local directory, or the az:// URI. */
  dataUri: string;
  /**
   * The job lease the replicas run with: JOB_LEASE_MS paced to the machine's load when they start.
   * Beside a second suite (load average 12–25) a replica's renewals came later than 3 s and its
   * running jobs were taken as stopped ("interrupted: the replica running it stopped").
   */
  leaseMs: number;
  /** SIGKILL replica `i` (a crash); resolves once HAProxy no longer sends it requests. */
  kill(i: number): Promise<void>;
  /** Start replica `i` again on its port and state directory (SIGTERM first if it runs), with `args` added; resolves once it is in rotation again. */
  restart(i: number, args?: string[]): Promise<void>;
  /** SIGTERM replica `i`, wait for its exit; answers the exit code. */
  stop(i: number): Promise<number | null>;
}

export function replicasForFile(opts: ReplicaOptions): Replicas {
  const bed = { replicas: [] as Quiver[] } as Replicas;
  let az: Azurite | undefined;
  let lb: Haproxy | undefined;
  let shared = "";
  const ports: number[] = [];
  const stateDirs: string[] = [];
  let storageArgs: string[] = [];
  // Each named as HAProxy names it (r0, r1, …): its metrics' replica label and the start of its id.
  const replicaArgs = (i: number, more: string[] = []) => ["--port", String(ports[i]), "--replica-name", `r${i}`, "--auto-maintenance", "off", ...(opts.args ?? []), ...storageArgs, ...more];

  // The lease goes by environment: a replica that does not know the option yet ignores it, where an
  // unknown flag would stop its start. Writes get 5 minutes, not 60 s: beside a second suite (load
  // average 12–25 on 2 cores) contended commits across replicas answered 503 at 60 s.
  const start = (i: number, more?: string[]) =>
    startQuiver({ dataUri: bed.dataUri, dataDir: stateDirs[i], args: replicaArgs(i, more), env: { QUIVER_JOB_LEASE_MS: String(bed.leaseMs), QUIVER_MAX_CLOCK_SKEW_MS: String(MAX_CLOCK_SKEW_MS), QUIVER_WRITE_TIMEOUT_MS: "300000", ...opts.env } });

  // A port found free may be taken before the replica binds it (another file's server on port 0
  // meanwhile): the first start takes another one. Restarts keep theirs, which HAProxy knows.
  const firstStart = async (i: number): Promise<Quiver> => {
    for (let tries = 1; ; tries++) {
      try {
        return await start(i);
      } catch (err) {
        if (tries === 3 || !/port \d+ is in use/.test(String(err))) throw err;
        ports[i] = await freePort();
      }
    }
  };

  beforeAll(async () => {
    if (opts.store === "azurite") {
      az = await startAzurite();
      await az.createContainer("replicas");
      bed.dataUri = "az://replicas/quiver";
      storageArgs = Object.entries(az.storageOptions()).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);
    } else {
      shared = tempDataDir();
      bed.dataUri = shared;
    }
    bed.leaseMs = paced(JOB_LEASE_MS);
    for (let i = 0; i < opts.replicas; i++) {
      ports.push(await freePort());
      stateDirs.push(tempDataDir());
    }
    // All at once, as a deployment starts them: the first starts race on an empty data directory.
    bed.replicas.push(...(await Promise.all(ports.map((_, i) => firstStart(i)))));

    lb = await startHaproxy(ports, opts.checks);
    bed.url = lb.url;
  }, SLOW_TEST_MS);

  bed.call = (method, p, body, headers) => request(bed.url + p, method, body, { "x-api-key": ADMIN_KEY, ...headers });
  bed.kill = async (i) => {
    await bed.replicas[i].kill();
    // docs/haproxy.cfg's checks take a dead replica out after 3 failures 2 s apart.
    await lb!.untilStatus(`r${i}`, (s) => s.startsWith("DOWN"), paced(15_000));
  };
  bed.stop = async (i) => {
    const code = await bed.replicas[i].stop();
    await lb!.untilStatus(`r${i}`, (s) => s.startsWith("DOWN") || s.startsWith("NOLB"));
    return code;
  };
  bed.restart = async (i, more) => {
    await bed.replicas[i].stop();
    bed.replicas[i] = await start(i, more);
    await lb!.untilStatus(`r${i}`, (s) => s === "UP", paced(30_000));
  };

  // A failed test shows what the replicas logged (warnings and errors): a 500's cause is only there.
  afterEach(({ task }) => {
    if (task.result?.state !== "fail") return;
    for (const [i, q] of bed.replicas.entries()) console.error(`replica r${i} stderr (last lines):\n${q.stderr().split("\n").slice(-40).join("\n")}`);
  });

  afterAll(async () => {
    await Promise.all(bed.replicas.map((q) => q?.stop()));
    await lb?.stop();
    await az?.stop();
    for (const d of [...stateDirs, shared]) if (d) removeDir(d);
  }, 60_000);

  return bed;
}

/** The replicas (indexes into bed.replicas) that have a job process running `script` (e.g. "backfill.js") now. */
export function runningJobIn(bed: Replicas, script: string): number[] {
  const table = processTable();
  return bed.replicas.flatMap((q, i) => (q.proc.exitCode === null && processesRunning(script, q.proc.pid!, table).length > 0 ? [i] : []));
}
