// Cost of authentication on the cheapest operation: namespace describe, closed loop, with an API
// key and with a JWT (RS256, verified by jose; verified tokens are cached until they expire).
//
//   node dist/bench/auth.js [--concurrency 32] [--duration 5]
import { generateKeyPair, exportSPKI, SignJWT } from "jose";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Conn } from "./http-client.js";
import { startQuiver } from "./quiver-process.js";
import { closedLoop, header, line } from "./stats.js";

const { values } = parseArgs({ options: { concurrency: { type: "string", default: "32" }, duration: { type: "string", default: "5" } } });
const C = Number(values.concurrency);
const D = Number(values.duration);
const KEY = "bench-admin-key";

const pair = await generateKeyPair("RS256");
process.env.QUIVER_JWT_PUBLIC_KEY = await exportSPKI(pair.publicKey);
const jwt = await new SignJWT({ role: "admin" }).setProtectedHeader({ alg: "RS256" }).setExpirationTime("1h").sign(pair.privateKey);
const dataDir = mkdtempSync(path.join(tmpdir(), "quiver-bench-auth-"));
const q = await startQuiver(dataDir, KEY);
const { hostname, port } = new URL(q.url);
try {
  const setup = new Conn(hostname, Number(port));
  await setup.request("POST", "/v1/namespace/b/create", `x-api-key: ${KEY}\r\n`, Buffer.from("{}"));
  setup.close();
  console.log(`namespace describe, ${C} in flight, ${D} s each`);
  console.log(header());
  for (const [name, headers] of [
    ["describe, API key", `x-api-key: ${KEY}\r\n`],
    ["describe, JWT", `authorization: Bearer ${jwt}\r\n`],
  ]) {
    const conns = Array.from({ length: C }, () => new Conn(hostname, Number(port)));
    const body = Buffer.from("{}");
    const r = await closedLoop(name, C, D, async (loop) => {
      const reply = await conns[loop].request("POST", "/v1/namespace/b/describe", headers, body);
      return reply.status === 200 ? null : `status ${reply.status}`;
    });
    console.log(line(r));
    conns.forEach((c) => c.close());
  }
} finally {
  await q.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
