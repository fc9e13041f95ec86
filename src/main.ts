// Entry point: configuration, services, auth, then the server; SIGTERM drains and exits 0.
import { setupAuth, type AuthSetup } from "./auth/authenticate.js";
import { adminKeyFile } from "./auth/api-keys.js";
import { helpText, loadConfig, unknownVariables } from "./config.js";
import { log, setLogLevel } from "./log.js";
import { carryDrainingRefusals, drainingRefusals, watch } from "./metrics.js";
import { SEP } from "./catalog/names.js";
import { createPipeline } from "./http/pipeline.js";
import { dataPathValidators, routes } from "./routes.js";
import { prepareInTurns } from "./schemas/validate.js";
import { listenStarting, portOf, startServer, type Starting } from "./server.js";
import { createServices } from "./services.js";
import { loadUws } from "./util/runtime.js";
import { reclaim } from "./operations/admin.js";
import { hasV8Flags, V8_FLAGS } from "./util/v8-flags.js";
import { packageVersion } from "./util/package-version.js";
import { leaveStopRefusals, takeStopRefusals } from "./util/stop-refusals.js";

/** Releasing the services after the drain (serving saves, job records, pools) gets at least this long, even when requests took the whole deadline. */
const CLOSE_MIN_MS = 3000;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) return void process.stdout.write(helpText(packageVersion()));
  if (argv.includes("--version")) return void process.stdout.write(`quiver ${packageVersion()}\n`);
  const config = loadConfig(argv);
  setLogLevel(config.logLevel);
  const unknown = unknownVariables();
  if (unknown.length) log.warn("these QUIVER_* variables name no option and are ignored (quiver --help lists the options)", { variables: unknown });
  // Before anything is opened: on a runtime without a uWS binary, one line says which ones work.
  await loadUws();
  let auth: AuthSetup | undefined;
  // View refreshes ask for their definer's credential only once jobs run (after listen): auth is set by then.
  // A data directory that does not answer yet: the port is taken at once, not ready, while it is tried again.
  let starting: Starting | null = null;
  const services = await createServices(
    config,
    (key) => auth!.credential(key),
    async (cause) => {
      if (starting) return starting.setCause(cause);
      starting = await listenStarting(config, cause);
      process.stdout.write(`listening on http://${config.host}:${await portOf(starting.socket)} (not ready: the data directory does not answer yet)\n`);
    },
  );
  auth = await setupAuth(config, services.system);
  const pipeline = createPipeline(services, auth.authenticate, routes);
  // Set in the callback, which TypeScript's narrowing does not see.
  const early = starting as Starting | null;
  // On the not-ready listener's socket, if there was one: the port never changes hands.
  const server = await startServer(services, pipeline, early);
  // Compiling the search body's validator held the event loop 80–105 ms at the first search after
  // a start, every request in flight waiting; the data path's compile in idle turns from now on.
  prepareInTurns(dataPathValidators());
  // After listening: a second start on a taken port must fail before touching the data directory.
  await services.jobs.start();
  await reclaim(services, "start");
  // After listening (a start on a taken port stops before this): releasing a saved index's pin writes the table.
  void services.warm();
  carryDrainingRefusals(takeStopRefusals(config.stateDir));
  watch({ inFlight: server.inFlight, oldestSeconds: server.oldestSeconds, pool: services.pool.stats, jobs: services.jobs.counts, tableExists: (objectId) => services.catalog.get(objectId.split(SEP))?.type === "table", jobsHere: services.jobs.runningHere, openTables: services.tables.openHandles, draining: () => services.lifecycle.draining, warm: () => ({ tables: services.lifecycle.warming, timedOut: services.lifecycle.warmTimedOut }) }, config.replicaName);
  // SIGTERM (what process managers and orchestrators send) drains for --drain-delay-ms first;
  // SIGINT (Ctrl-C at a terminal, where no balancer waits) and a second signal skip the delay.
  // Set before "listening" is printed: a signal sent as soon as it is seen drains too.
  let skipDelay!: () => void;
  const skip = new Promise<void>((resolve) => (skipDelay = resolve));
  let stopping = false;
  const stop = async (signal: string) => {
    if (signal === "SIGINT" || stopping) skipDelay();
    if (stopping) return;
    stopping = true;
    const drainDelayMs = signal === "SIGINT" ? 0 : config.drainDelayMs;
    log.info("stopping", { signal, inFlight: server.inFlight(), drainDelayMs, shutdownDeadlineMs: config.shutdownDeadlineMs });
    // Whatever still waits (a step that ignores its deadline), the process ends in bounded time.
    setTimeout(() => {
      log.error("shutdown overran its deadlines; exiting", { drainDelayMs, shutdownDeadlineMs: config.shutdownDeadlineMs });
      leaveStopRefusals(config.stateDir, drainingRefusals());
      process.exit(1);
    }, drainDelayMs + config.shutdownDeadlineMs + CLOSE_MIN_MS + 1000).unref();
    // A replica on its way out starts no job another replica could run from the start.
    void services.jobs.drain();
    const left = await server.drain(config.drainDelayMs, config.shutdownDeadlineMs, skip);
    await services.close(Math.max(left, CLOSE_MIN_MS));
    leaveStopRefusals(config.stateDir, drainingRefusals());
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  if (auth.generatedKey) {
    process.stdout.write(
      `generated admin API key (shown once; also stored 0600 in ${adminKeyFile(config.stateDir)}):\n  ${auth.generatedKey}\n`,
    );
  }
  process.stdout.write(`listening on http://${config.host}:${server.port}\n`);
  log.info("started", { dataDir: config.dataDir, workers: config.workers, port: server.port, pid: process.pid });
  if (!hasV8Flags()) {
    log.warn("node was started without Quiver's V8 flags (npm start passes them): queries lose throughput", { flags: V8_FLAGS.join(" "), see: "docs/operations.md" });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`quiver: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
