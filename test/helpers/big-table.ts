// A table whose full scan is much larger than socket buffers: for clients that never read.
import * as lancedb from "@lancedb/lancedb";
import { A } from "./index-data.js";

/** Rows of the table `big`: a full scan answers about 36 MB, far more than socket buffers hold. */
export const BIG_ROWS = 35_000;
const DIM = 256;

export async function seedBig(dataDir: string, name = "big") {
  const floats = new Float32Array(BIG_ROWS * DIM).map((_, i) => (i % 997) / 997);
  const child = A.makeData({ type: new A.Float32(), length: BIG_ROWS * DIM, data: floats });
  const vecType = new A.FixedSizeList(DIM, new A.Field("item", new A.Float32(), true));
  const v = A.makeVector(A.makeData({ type: vecType, length: BIG_ROWS, nullCount: 0, child }));
  const id = A.makeVector(Int32Array.from({ length: BIG_ROWS }, (_, i) => i));
  const db = await lancedb.connect(dataDir);
  await db.createTable(name, new A.Table({ id, v }) as never);
}
