// Builds the serving index's distance kernel (native/kernel/vectors.wat, WebAssembly SIMD) into
// dist/native/vectors.wasm, where src/serving/kernel.ts loads it: `npm run build:kernel`.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import wabtInit from "wabt";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, "..", "dist", "native");
const wabt = await wabtInit();
const mod = wabt.parseWat("vectors.wat", readFileSync(path.join(here, "kernel", "vectors.wat"), "utf8"), { simd: true, threads: true });
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, "vectors.wasm"), Buffer.from(mod.toBinary({}).buffer));
