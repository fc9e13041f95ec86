// An index that cannot be held is refused before a row is read (LanceDB then answers its table,
// reason `memory`): past the rows its chunk table holds, or past the budget or what one WebAssembly
// memory can grow to (4 GiB, whatever `--serving-memory-mb` allows). Before, such a build read every
// row first and failed when a slot or a page would not come.
import { expect, it } from "vitest";
import { MAX_MEMORY_BYTES, MAX_SLOTS } from "../../dist/src/serving/graph.js";
import { wontFit } from "../../dist/src/serving/table-index.js";

const GiB = 2 ** 30;

it("refuses more rows than an index holds, however small the vectors and large the budget", () => {
  expect(MAX_SLOTS).toBe(16_777_216);
  expect(wontFit(MAX_SLOTS + 1, 2, 64 * GiB)).toBe(`${MAX_SLOTS + 1} rows, past the ${MAX_SLOTS} an index holds`);
  expect(wontFit(MAX_SLOTS, 2, 64 * GiB)).toBeNull();
});

it("refuses an index larger than one memory can grow to, even within the budget", () => {
  expect(MAX_MEMORY_BYTES).toBe(4 * GiB);
  // 5 million rows of 1,024 floats: about 21 GiB, within a 64 GiB budget.
  expect(wontFit(5_000_000, 1024, 64 * GiB)).toMatch(/^about \d+ MiB, past 4096 MiB$/);
  expect(wontFit(100_000, 128, 64 * GiB)).toBeNull();
});

it("refuses an index larger than the budget", () => {
  expect(wontFit(100_000, 128, 16 * 2 ** 20)).toMatch(/^about \d+ MiB, past 16 MiB$/);
  expect(wontFit(100_000, 128, 2 * GiB)).toBeNull();
});
