// Requests refused 503 `draining` reach a replica after it stopped listening (on connections it
// still held), and the process exits moments later, before any scrape sees them. Their count is
// left in the state directory at exit and carried into the next start's counter, so that
// `increase()` across the restart shows them (docs/alerts.yml, QuiverRefusedWhileStopping).
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

const fileOf = (stateDir: string) => path.join(stateDir, "refused-while-stopping");

/** The count the last process left (0 if none), taken: the file is removed. */
export function takeStopRefusals(stateDir: string): number {
  let text: string;
  try {
    text = readFileSync(fileOf(stateDir), "utf8");
  } catch {
    return 0;
  }
  rmSync(fileOf(stateDir), { force: true });
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** Leaves `total` (the counter's whole value, carried counts included) for the next start. */
export function leaveStopRefusals(stateDir: string, total: number): void {
  if (total > 0) writeFileSync(fileOf(stateDir), String(total), { mode: 0o600 });
}
