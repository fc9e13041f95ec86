// Azurite for tests: the bench's launcher (bench/azurite.ts), one implementation.
import { afterAll, beforeAll } from "vitest";
import { startAzurite, type Azurite } from "../../bench/azurite.js";
import { removeDir, startQuiver, type Quiver } from "./quiver.js";

export * from "../../bench/azurite.js";

/** Storage options as the server's `--storage-option key=value` arguments. */
export const storageArgs = (options: Record<string, string>) => Object.entries(options).flatMap(([k, v]) => ["--storage-option", `${k}=${v}`]);

/**
 * Azurite and one server on it (`--data-dir az://<container>/quiver`, `args` after the storage
 * options) for a whole test file: filled in before its tests, stopped after them.
 */
export function serverOnAzurite(container: string, args: string[] = [], setupTimeoutMs = 120_000): { az: Azurite; q: Quiver } {
  const s = {} as { az: Azurite; q: Quiver };
  beforeAll(async () => {
    s.az = await startAzurite();
    await s.az.createContainer(container);
    s.q = await startQuiver({ dataUri: `az://${container}/quiver`, args: [...storageArgs(s.az.storageOptions()), ...args] });
  }, setupTimeoutMs);
  afterAll(async () => {
    await s.q?.stop();
    if (s.q?.dataDir) removeDir(s.q.dataDir);
    await s.az?.stop();
  });
  return s;
}
