// The data directory as a URI and the object store options: where each comes from, and what is refused.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { resolveLocation, normaliseLocation } from "../../src/catalog/locations.js";
import { namespaceProperties } from "../../src/engine/storage.js";

describe("data-dir and storage options", () => {
  it("a local path or file:// is today's default: absolute, state in <data-dir>/.quiver, not remote", () => {
    const c = loadConfig(["--data-dir", "file:///tmp/q1"], {});
    expect(c).toMatchObject({ dataDir: "/tmp/q1", remote: false, stateDir: "/tmp/q1/.quiver", storageOptions: {} });
    expect(loadConfig(["--data-dir", "rel"], {}).dataDir).toBe(path.resolve("rel"));
  });

  it("an object store URI needs --state-dir; trailing slashes go, the scheme is lower-cased", () => {
    expect(() => loadConfig(["--data-dir", "s3://b/p"], {})).toThrow(/^state-dir is required/);
    const c = loadConfig(["--data-dir", "S3://b/p/", "--state-dir", "st"], {});
    expect(c).toMatchObject({ dataDir: "s3://b/p", remote: true, stateDir: path.resolve("st") });
    expect(loadConfig(["--data-dir", "az://c"], { QUIVER_STATE_DIR: "/s" }).dataDir).toBe("az://c");
    expect(() => loadConfig(["--data-dir", "hdfs://x"], {})).toThrow(/unsupported scheme/);
    // Managed versions publish with the store's put-if-not-exists, on an object store too.
    expect(loadConfig(["--data-dir", "gs://b", "--state-dir", "/s", "--managed-versioning"], {}).managedVersioning).toBe(true);
  });

  it("flags win over QUIVER_STORAGE_OPTIONS, which wins over the config file", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "quiver-cfg-"));
    try {
      const file = path.join(dir, "c.json");
      writeFileSync(file, JSON.stringify({ "storage-options": { region: "file", a: "file", n: 3 } }));
      const c = loadConfig(["--config", file, "--storage-option", "region=flag", "--storage-option", "k=v=w"], { QUIVER_STORAGE_OPTIONS: '{"region":"env","a":"env"}' });
      expect(c.storageOptions).toEqual({ region: "flag", a: "env", n: "3", k: "v=w" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => loadConfig(["--storage-option", "novalue"], {})).toThrow(/key=value/);
    expect(() => loadConfig([], { QUIVER_STORAGE_OPTIONS: "[1]" })).toThrow(/JSON object/);
  });

  it("locations under an object store root stay inside it", () => {
    expect(resolveLocation("az://c/q", "t.lance")).toBe("az://c/q/t.lance");
    expect(resolveLocation("az://c/q", "az://c/q/t.lance")).toBe("az://c/q/t.lance");
    expect(normaliseLocation("az://c/q", "az://c/q/t.lance")).toBe("t.lance");
    for (const bad of ["../t.lance", "/t.lance", "a/../../t.lance", "s3://other/t.lance", "az://c/qq/t.lance", ""]) {
      expect(() => resolveLocation("az://c/q", bad), bad).toThrow(/outside the data directory/);
    }
  });

  it("the directory namespace gets the options as storage.* properties", () => {
    expect(namespaceProperties({ account_name: "a", allow_http: "true" })).toEqual({ "storage.account_name": "a", "storage.allow_http": "true" });
  });
});
