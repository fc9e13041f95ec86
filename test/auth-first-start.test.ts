// The first start without configured credentials generates an admin key and prints it once on the
// server process's stdout (the rest of the credential tests run in process: test/auth.test.ts).
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { removeDir, request, startQuiver } from "./helpers/quiver.js";

describe("first start without configured credentials", () => {
  it("generates an admin key, prints it once, stores only its hash plus a 0600 key file", async () => {
    const first = await startQuiver({ noKeys: true, env: { QUIVER_API_KEYS: "" } });
    const printed = /generated admin API key[^\n]*\n\s+(\S+)/.exec(first.stdout())?.[1];
    expect(printed).toBeTruthy();
    const keyFile = path.join(first.dataDir, ".quiver", "admin.key");
    expect(readFileSync(keyFile, "utf8").trim()).toBe(printed);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const stored = readFileSync(path.join(first.dataDir, ".quiver", "keys.json"), "utf8");
    expect(stored).not.toContain(printed!);
    expect((await request(`${first.url}/v1/namespace/%24/list`, "GET", undefined, { "x-api-key": printed! })).status).toBe(200);
    expect(first.stderr()).not.toContain(printed!);
    expect(await first.stop()).toBe(0);

    const second = await startQuiver({ noKeys: true, env: { QUIVER_API_KEYS: "" }, dataDir: first.dataDir });
    expect(second.stdout()).not.toContain(printed!);
    expect(second.stdout()).not.toContain("generated");
    expect((await request(`${second.url}/v1/namespace/%24/list`, "GET", undefined, { "x-api-key": printed! })).status).toBe(200);
    await second.stop();
    removeDir(first.dataDir);
  });
});
