// API keys: configured as `key:role[:prefix|prefix]`, or generated on first start.
// Only SHA-256 hashes are kept, in memory and at rest; keys are random 256-bit values,
// so a fast hash is enough (there is nothing to brute-force).
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { SEP } from "../catalog/names.js";
import type { SystemTables } from "../util/system-table.js";
import { isRole, type Principal } from "./principal.js";

export interface StoredKey {
  hash: string;
  role: Principal["role"];
  prefixes: string[][] | null;
  label: string;
}

export const hashKey = (key: string) => createHash("sha256").update(key).digest("hex");

/**
 * A key's stable id, kept with what the key defines (views) and owns (jobs): derived one way from
 * its hash, so it does not change when keys are reordered, cannot be used to authenticate, and is
 * not the hash that authenticates.
 */
export const keyIdOf = (hash: string) => "key:" + createHash("sha256").update("quiver key id\n" + hash).digest("hex").slice(0, 16);

export function parseKeySpec(spec: string): { key: string; entry: StoredKey }[] {
  return spec
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item, i) => {
      const [key, role, prefixes] = item.split(":");
      if (!key || !role || !isRole(role)) {
        throw new Error(`api-keys entry ${i + 1}: expected key:role[:prefix|prefix] with role read, write or admin`);
      }
      return {
        key,
        entry: {
          hash: hashKey(key),
          role,
          prefixes: prefixes ? prefixes.split("|").map((p) => p.split(SEP)) : null,
          label: `configured key ${i + 1}`,
        },
      };
    });
}

/** Where an earlier release kept the generated key's hash (moved to the shared store on start). */
const keysFile = (stateDir: string) => path.join(stateDir, "keys.json");
export const adminKeyFile = (stateDir: string) => path.join(stateDir, "admin.key");

/** The shared store's row of the generated admin key. */
const GENERATED = "generated-admin";

/**
 * Keys stored in the shared store (their hashes only). When none exist and nothing else is
 * configured, generate an admin key: replicas starting at once on a fresh data directory race to
 * insert its hash, and only the one that wins writes the key (0600) to its state directory and
 * returns it, once, to print; the others use the winner's.
 */
export async function loadStoredKeys(store: SystemTables, stateDir: string, generateIfMissing: boolean): Promise<{ keys: StoredKey[]; generated?: string }> {
  const table = await store.open("keys", []);
  const row = (k: StoredKey) => ({ key: GENERATED, doc: JSON.stringify(k) });
  const stored = async () => (await table.select()).map((r) => JSON.parse(r.doc as string) as StoredKey);
  const file = keysFile(stateDir);
  if (existsSync(file)) {
    await table.insertIfAbsent((JSON.parse(readFileSync(file, "utf8")) as StoredKey[]).map(row));
    renameSync(file, `${file}.migrated`);
  }
  const keys = await stored();
  if (keys.length > 0 || !generateIfMissing) return { keys };
  const key = "qk_" + randomBytes(32).toString("base64url");
  const entry: StoredKey = { hash: hashKey(key), role: "admin", prefixes: null, label: "generated admin key" };
  if ((await table.insertIfAbsent([row(entry)])) === 0) return { keys: await stored() };
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  writeFileSync(adminKeyFile(stateDir), key + "\n", { mode: 0o600 });
  return { keys: [entry], generated: key };
}
