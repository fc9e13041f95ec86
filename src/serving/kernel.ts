// The serving index's distance kernel: WebAssembly SIMD (native/kernel/vectors.wat, built into
// dist/native/vectors.wasm by `npm run build:kernel`), instantiated once per thread over an index's
// shared memory, so every worker computes on the one copy of the vectors.
import { readFileSync } from "node:fs";

export interface Kernel {
  /** Squared L2 distance of the n floats at byte addresses a and b. */
  l2sq(a: number, b: number, n: number): number;
  dot(a: number, b: number, n: number): number;
  /**
   * From the query at q to `count` vectors whose byte addresses are the i32s at `addrs`: squared L2
   * distances (dots 0) or dot products (dots 1), written as f32s at `out`.
   */
  many(q: number, addrs: number, count: number, out: number, n: number, dots: number): void;
}

let compiled: WebAssembly.Module | null = null;

/** The kernel over `memory` (compiled on first use in this thread). */
export function kernelFor(memory: WebAssembly.Memory): Kernel {
  // dist/src/serving/kernel.js → dist/native/vectors.wasm
  compiled ??= new WebAssembly.Module(readFileSync(new URL("../../native/vectors.wasm", import.meta.url)));
  return new WebAssembly.Instance(compiled, { env: { memory } }).exports as unknown as Kernel;
}
