// The Chromium the browser tests drive, so that `npm ci && npm test` pass on a machine without one.
// First choice: the headless Chromium shipped inside the `@sparticuz/chromium` devDependency
// (brotli-compressed, with the NSS/expat libraries it links against, which a bare Debian lacks),
// unpacked once into node_modules/.cache. Fallback: Debian's /usr/bin/chromium, for machines the
// packaged x64 build does not suit. QUIVER_TEST_CHROMIUM=packaged forbids the fallback (to prove
// the packaged one works here); QUIVER_TEST_CHROMIUM=system uses Debian's.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { brotliDecompressSync } from "node:zlib";
import type { LaunchOptions } from "playwright-core";

const SYSTEM = "/usr/bin/chromium";
const PACKAGE = path.resolve(__dirname, "../../node_modules/@sparticuz/chromium");
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

// Test files run in parallel workers: each unpacks into its own directory and renames it into
// place, so no worker ever launches a half-written binary.
function unpackPackaged(): string {
  const version = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8")).version as string;
  const dir = path.resolve(PACKAGE, `../../.cache/quiver-chromium-${version}`);
  if (existsSync(path.join(dir, "chromium"))) return dir;
  const staging = `${dir}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const unbrotli = (name: string) => brotliDecompressSync(readFileSync(path.join(PACKAGE, "bin", name)));
  writeFileSync(path.join(staging, "chromium"), unbrotli("chromium.br"), { mode: 0o755 });
  for (const archive of ["al2023.tar.br", "fonts.tar.br", "swiftshader.tar.br"]) {
    execFileSync("tar", ["-x", "-C", staging], { input: unbrotli(archive) });
  }
  try {
    renameSync(staging, dir);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another worker got there first
  }
  return dir;
}

function packaged(): LaunchOptions {
  const dir = unpackPackaged();
  return {
    executablePath: path.join(dir, "chromium"),
    // The flags the package is built for: one process, and SwiftShader's software GL beside the binary.
    args: [...ARGS, "--single-process", "--no-zygote", "--in-process-gpu", "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    env: { ...process.env, LD_LIBRARY_PATH: path.join(dir, "lib"), FONTCONFIG_PATH: path.join(dir, "fonts") },
  };
}

const system = (): LaunchOptions => ({ executablePath: SYSTEM, args: ARGS });

/** Launch options for playwright-core's `chromium.launch` / `launchPersistentContext`. */
export function chromiumLaunchOptions(): LaunchOptions {
  const choice = process.env.QUIVER_TEST_CHROMIUM;
  if (choice === "packaged") return packaged();
  if (choice === "system" || process.arch !== "x64") return system();
  try {
    return packaged();
  } catch (e) {
    if (existsSync(SYSTEM)) return system();
    throw e;
  }
}
