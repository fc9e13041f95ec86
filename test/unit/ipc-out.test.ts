// Re-framing engine result buffers (one little IPC file per batch) into one IPC file, in process:
// the output decodes to exactly the rows of the inputs, in order, with their schema.
import { describe, expect, it } from "vitest";
import { arrow } from "../../src/engine/arrow.js";
import { emptyIpcFile, ipcFile } from "../../src/engine/ipc-out.js";

const batchFile = (from: number, n: number) =>
  Buffer.from(
    arrow.tableToIPC(
      new arrow.Table({
        id: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => from + i), new arrow.Int32()),
        name: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => `r${from + i}`), new arrow.Utf8()),
      }),
      "file",
    ),
  );

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(c);
  return Buffer.concat(parts);
}

describe("IPC re-framing", () => {
  it("three engine batches become one file holding their rows in order", async () => {
    const bufs = [batchFile(0, 3), batchFile(3, 2), batchFile(5, 4)];
    let i = 1;
    const out = arrow.tableFromIPC(await collect(ipcFile(bufs[0], async () => bufs[i++] ?? null)));
    expect(out.numRows).toBe(9);
    expect(out.batches.length).toBe(3);
    expect(Array.from(out.getChild("id")!.toArray() as Int32Array)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(out.getChild("name")!.get(8)).toBe("r8");
  });

  it("a result of one engine buffer is that buffer as it is, with no footer encoded", async () => {
    const only = batchFile(0, 10);
    const chunks: Uint8Array[] = [];
    for await (const c of ipcFile(only, async () => null)) chunks.push(c);
    expect(chunks).toEqual([only]);
    expect(chunks[0]).toBe(only);
  });

  it("a first buffer holding the query's limit of rows is the answer: it does not wait for the engine's last pull", async () => {
    const only = batchFile(0, 10);
    let asked = 0;
    // The engine's last pull, made but never answered: the answer is complete without it.
    const unanswered = () => (asked++, new Promise<Buffer | null>(() => undefined));
    const chunks: Uint8Array[] = [];
    for await (const c of ipcFile(only, unanswered, 10)) chunks.push(c);
    expect(chunks).toEqual([only]);
    expect(asked).toBe(1);
    // Fewer rows than the limit: the engine may have more, so the answer waits for its pull.
    let waited = false;
    for await (const c of ipcFile(batchFile(0, 9), async () => ((waited = true), null), 10)) chunks.push(c);
    expect(waited).toBe(true);
  });

  it("a large first buffer streams before the engine's next is asked for", async () => {
    const big = batchFile(0, 150_000);
    expect(big.length).toBeGreaterThan(1024 * 1024);
    const rest = [batchFile(150_000, 2)];
    let asked = 0;
    const it = ipcFile(big, async () => (asked++, rest.shift() ?? null));
    const seen: number[] = [];
    const parts: Uint8Array[] = [];
    for await (const c of it) {
      seen.push(asked);
      parts.push(c);
    }
    // The magic, the schema and the first batch leave before the engine is asked again.
    expect(seen.slice(0, 3)).toEqual([0, 0, 0]);
    const out = arrow.tableFromIPC(Buffer.concat(parts));
    expect(out.numRows).toBe(150_002);
    expect(out.getChild("name")!.get(150_001)).toBe("r150001");
  });

  it("a buffer that is not an IPC file is refused before anything is produced", () => {
    expect(() => ipcFile(Buffer.from("not arrow at all, not at all"), async () => null)).toThrow(/not an Arrow IPC file/);
  });

  it("an empty result is a schema-only file", () => {
    const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int32(), true)]);
    const t = arrow.tableFromIPC(emptyIpcFile(schema));
    expect(t.numRows).toBe(0);
    expect(t.schema.fields.map((f) => f.name)).toEqual(["id"]);
  });
});
