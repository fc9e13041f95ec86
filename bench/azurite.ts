// Azurite (npm `azurite`), Microsoft's Azure Blob Storage emulator, started by a test or a bench:
// in memory, on a free port, silent, killed after. Containers are made with a SharedKey-signed
// REST call (Azure's "Create Container"), with the emulator's well-known account and key.
import { spawn, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";

export const AZURITE_ACCOUNT = "devstoreaccount1";
/** Azurite's documented development key (public, for the emulator only). */
export const AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

// The package's `azurite-blob` bin, found as Node finds the package (no exports map to go through).
const BIN = path.join(path.dirname(createRequire(import.meta.url).resolve("azurite/package.json")), "dist/src/blob/main.js");

export interface Azurite {
  /** http://127.0.0.1:<port> */
  url: string;
  /** The account's blob endpoint: <url>/devstoreaccount1 */
  endpoint: string;
  createContainer(name: string): Promise<void>;
  /** Storage options for LanceDB (object_store's Azure keys) reaching this emulator. */
  storageOptions(): Record<string, string>;
  /** Stop answering (SIGSTOP: connections are accepted by the kernel, nothing answers), and go on (SIGCONT). */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export async function startAzurite(): Promise<Azurite> {
  const work = mkdtempSync(path.join(tmpdir(), "azurite-"));
  const proc: ChildProcess = spawn(
    process.execPath,
    [BIN, "--inMemoryPersistence", "--blobHost", "127.0.0.1", "--blobPort", "0", "--silent", "--skipApiVersionCheck", "--disableProductStyleUrl"],
    { stdio: ["ignore", "pipe", "pipe"], cwd: work },
  );
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`azurite did not start:\n${out}`)), 30_000);
    const seen = (d: Buffer) => {
      out += d;
      const m = /listens on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout!.on("data", seen);
    proc.stderr!.on("data", (d) => (out += d));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`azurite exited with ${code}:\n${out}`));
    });
  });
  const endpoint = `${url}/${AZURITE_ACCOUNT}`;
  const exited = new Promise<void>((resolve) => proc.on("exit", () => resolve()));
  return {
    url,
    endpoint,
    async createContainer(name) {
      const date = new Date().toUTCString();
      const version = "2021-08-06";
      const toSign = ["PUT", "", "", "", "", "", "", "", "", "", "", "", `x-ms-date:${date}`, `x-ms-version:${version}`, `/${AZURITE_ACCOUNT}/${AZURITE_ACCOUNT}/${name}\nrestype:container`].join("\n");
      const sig = createHmac("sha256", Buffer.from(AZURITE_KEY, "base64")).update(toSign, "utf8").digest("base64");
      const res = await fetch(`${endpoint}/${name}?restype=container`, {
        method: "PUT",
        headers: { "x-ms-date": date, "x-ms-version": version, authorization: `SharedKey ${AZURITE_ACCOUNT}:${sig}` },
      });
      if (res.status !== 201) throw new Error(`create container ${name}: ${res.status} ${await res.text()}`);
    },
    // The account's endpoint given as an option (object_store's `azure_storage_endpoint`, path
    // style), not `use_emulator`: that one reads the address from AZURITE_BLOB_STORAGE_URL only and
    // falls back to the emulator's well-known key, so a process given no options would still pass.
    storageOptions: () => ({
      account_name: AZURITE_ACCOUNT,
      account_key: AZURITE_KEY,
      allow_http: "true",
      azure_storage_endpoint: endpoint,
    }),
    pause: () => void proc.kill("SIGSTOP"),
    resume: () => void proc.kill("SIGCONT"),
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGKILL");
      await exited;
      rmSync(work, { recursive: true, force: true });
    },
  };
}
