// A replica's identity: its name (--replica-name, by default the host name) and a random id kept
// in its state directory, so a restart knows the job leases of its previous run as its own and
// takes them back at once, and two replicas of one name (on one host) stay apart. The caller holds
// the state directory's lock (./state-lock.ts), so no other live process uses the same id.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** This replica's id: `<name>-<8 hex digits>`, stable across restarts on one state directory under one name. */
export function replicaId(stateDir: string, name: string): string {
  // The lock of earlier versions, a PID file: a PID says nothing once its process is gone.
  rmSync(path.join(stateDir, "replica.pid"), { force: true });
  const file = path.join(stateDir, "replica-id");
  if (!existsSync(file)) writeFileSync(file, randomUUID() + "\n", { mode: 0o600 });
  return `${name}-${readFileSync(file, "utf8").trim().replace(/-/g, "").slice(0, 8)}`;
}
