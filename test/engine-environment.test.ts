// LanceDB's thread counts come from the environment (LANCE_CPU_THREADS, LANCE_IO_CORE_RESERVATION),
// and a value it cannot take panics at its first search, failing every later write and search too.
// Quiver refuses to start on one instead, naming the variable; good values start a server whose
// tables work.
import { expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { removeDir, startQuiver } from "./helpers/quiver.js";

const refusal = (name: string) => new RegExp(`${name} \\(read by LanceDB from the environment\\) must be a whole number`);

it("a value LanceDB would panic on is refused by name; whole numbers from the least up pass", () => {
  for (const bad of ["abc", "-1", "0", "1.5", " 2", ""]) expect(() => loadConfig([], { LANCE_CPU_THREADS: bad }), bad).toThrow(refusal("LANCE_CPU_THREADS"));
  for (const bad of ["x", "-1"]) expect(() => loadConfig([], { LANCE_IO_CORE_RESERVATION: bad }), bad).toThrow(refusal("LANCE_IO_CORE_RESERVATION"));
  expect(() => loadConfig([], { LANCE_CPU_THREADS: "1", LANCE_IO_CORE_RESERVATION: "0" })).not.toThrow();
});

it("a server started with LANCE_CPU_THREADS=abc exits naming it; with 1 its tables work", async () => {
  await expect(startQuiver({ env: { LANCE_CPU_THREADS: "abc" } })).rejects.toThrow(refusal("LANCE_CPU_THREADS"));
  const q = await startQuiver({ env: { LANCE_CPU_THREADS: "1" } });
  try {
    expect((await q.call("POST", "/v1/table/t/create", [{ a: 1, v: [1, 2] }])).status).toBe(200);
    expect((await q.call("POST", "/v1/table/t/count_rows", {})).json).toBe(1);
    // A search needs the engine's CPU runtime, which a bad count would have broken.
    const found = await q.call("POST", "/v1/table/t/query", { vector: [1, 2], k: 1 }, { accept: "application/json" });
    expect(found.status, found.text).toBe(200);
  } finally {
    await q.stop();
    removeDir(q.dataDir);
  }
});
