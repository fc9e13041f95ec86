// A replica's identity: a random id kept in its state directory, so a restart knows the job
// leases of its previous run as its own and takes them back at once. Two live processes must not
// share one: the state directory is locked by the process using it (a pid file; a lock left by a
// process that is gone is taken over).
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** This replica's id; throws when another live process uses `stateDir`. */
export function replicaId(stateDir: string): string {
  const lock = path.join(stateDir, "replica.pid");
  const holder = existsSync(lock) ? Number(readFileSync(lock, "utf8")) : NaN;
  if (Number.isInteger(holder) && holder !== process.pid && alive(holder)) {
    throw new Error(`the state directory ${stateDir} is in use by process ${holder}: give each replica its own --state-dir`);
  }
  writeFileSync(lock, String(process.pid), { mode: 0o600 });
  const file = path.join(stateDir, "replica-id");
  if (!existsSync(file)) writeFileSync(file, randomUUID() + "\n", { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
}
