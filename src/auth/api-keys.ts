// API keys: configured as `key:role[:prefix|prefix]`, or generated on first start.
// Only SHA-256 hashes are kept, in memory and at rest; keys are random 256-bit values,
// so a fast hash is enough (there is nothing to brute-force).
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { SEP } from "../catalog/names.js";
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

const keysFile = (stateDir: string) => path.join(stateDir, "keys.json");
export const adminKeyFile = (stateDir: string) => path.join(stateDir, "admin.key");

/**
 * Keys stored in the state directory (by default `<data-dir>/.quiver`). When none exist and nothing else is configured,
 * generate an admin key, store its hash plus the key itself (0600), and return it once to print.
 */
export function loadStoredKeys(stateDir: string, generateIfMissing: boolean): { keys: StoredKey[]; generated?: string } {
  const file = keysFile(stateDir);
  if (existsSync(file)) return { keys: JSON.parse(readFileSync(file, "utf8")) as StoredKey[] };
  if (!generateIfMissing) return { keys: [] };
  const key = "qk_" + randomBytes(32).toString("base64url");
  const keys: StoredKey[] = [{ hash: hashKey(key), role: "admin", prefixes: null, label: "generated admin key" }];
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(adminKeyFile(stateDir), key + "\n", { mode: 0o600 });
  writeFileSync(file, JSON.stringify(keys, null, 2) + "\n", { mode: 0o600 });
  return { keys, generated: key };
}
