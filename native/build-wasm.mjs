// Builds native/udf/*.wat into WebAssembly with wabt and prints each module as base64, the form a
// virtual column's `udf` takes: `node native/build-wasm.mjs [file.wat ...]`.
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import wabtInit from "wabt";

const here = path.dirname(fileURLToPath(import.meta.url));
const files = process.argv.slice(2).length ? process.argv.slice(2) : readdirSync(path.join(here, "udf")).filter((f) => f.endsWith(".wat")).map((f) => path.join(here, "udf", f));
const wabt = await wabtInit();
for (const f of files) {
  const mod = wabt.parseWat(path.basename(f), readFileSync(f, "utf8"));
  const { buffer } = mod.toBinary({});
  console.log(`${path.basename(f, ".wat")} ${Buffer.from(buffer).toString("base64")}`);
}
