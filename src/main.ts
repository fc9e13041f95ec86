// Entry point: configuration, services, auth, then the server; SIGTERM drains and exits 0.
import { createRequire } from "node:module";
import { setupAuth } from "./auth/authenticate.js";
import { adminKeyFile } from "./auth/api-keys.js";
import { loadConfig } from "./config.js";
import { log, setLogLevel } from "./log.js";
import { watch } from "./metrics.js";
import { createPipeline } from "./http/pipeline.js";
import { startServer } from "./server.js";
import { createServices } from "./services.js";

/** The registry build of uWS silently falls back to a slow pure-Node server; refuse to run on it. */
function assertNativeUws(): void {
  const require = createRequire(import.meta.url);
  require("uWebSockets.js");
  const native = Object.keys(require.cache).some((k) => /uws_[^/]*\.node$/.test(k));
  if (!native) throw new Error("uWebSockets.js native binary did not load (fallback implementation in use)");
}

async function main(): Promise<void> {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  assertNativeUws();
  const services = await createServices(config);
  const auth = setupAuth(config);
  const server = await startServer(services, createPipeline(services, auth.authenticate));
  watch({ inFlight: server.inFlight, pool: services.pool.stats, jobs: services.jobs.counts, openTables: services.tables.openHandles });
  if (auth.generatedKey) {
    process.stdout.write(
      `generated admin API key (shown once; also stored 0600 in ${adminKeyFile(config.dataDir)}):\n  ${auth.generatedKey}\n`,
    );
  }
  process.stdout.write(`listening on http://${config.host}:${server.port}\n`);
  log.info("started", { dataDir: config.dataDir, workers: config.workers, port: server.port });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal, inFlight: server.inFlight() });
    await server.drain();
    await services.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err: unknown) => {
  process.stderr.write(`quiver: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
