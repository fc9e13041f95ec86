// Which uWebSockets.js build serves this Node, and a one-line refusal where none can. uWS is a
// native addon built per Node ABI, platform and (on Linux) glibc: `uws-pack` carries Node 20 and
// 22 binaries needing glibc 2.27; `@btc-vision/uwebsockets.js` (uWS 20.57) carries Node 24's,
// needing glibc 2.38. Neither falls back to a JavaScript server: a missing binary throws.
import type * as UwsModule from "uws-pack";

export type Uws = typeof UwsModule;

export const SUPPORTED_RUNTIMES =
  "Node.js 20.11+ or 22 (Linux x64/arm64 with glibc >= 2.27, macOS, Windows x64) or Node.js 24 (Linux with glibc >= 2.38, macOS, Windows x64)";

export interface Runtime {
  /** process.version, e.g. "v22.23.3". */
  node: string;
  platform: string;
  arch: string;
  /** glibc version on Linux, null elsewhere or on musl. */
  glibc: string | null;
}

const BUILDS: Record<number, { pkg: string; minGlibc: string }> = {
  20: { pkg: "uws-pack", minGlibc: "2.27" },
  22: { pkg: "uws-pack", minGlibc: "2.27" },
  24: { pkg: "@btc-vision/uwebsockets.js", minGlibc: "2.38" },
};

const PLATFORMS = new Set(["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"]);

const older = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  return x[0] !== y[0] ? x[0] < y[0] : (x[1] ?? 0) < (y[1] ?? 0);
};

const describe = (r: Runtime) => `Node.js ${r.node} on ${r.platform}-${r.arch}${r.glibc ? ` (glibc ${r.glibc})` : r.platform === "linux" ? " (no glibc)" : ""}`;

const refusal = (r: Runtime, why: string) =>
  new Error(`${describe(r)} is not supported: ${why}. Quiver runs on ${SUPPORTED_RUNTIMES}, where its HTTP server (uWebSockets.js) ships a native binary.`);

/** The package whose uWS binary fits `r`; throws the one-line refusal when none does. */
export function uwsPackageFor(r: Runtime): string {
  const [major, minor] = r.node.replace(/^v/, "").split(".").map(Number);
  const build = BUILDS[major];
  if (!build || (major === 20 && minor < 11)) throw refusal(r, `no uWebSockets.js build for Node ${major}.${minor}`);
  if (!PLATFORMS.has(`${r.platform}-${r.arch}`)) throw refusal(r, `no uWebSockets.js build for ${r.platform}-${r.arch}`);
  if (r.platform === "linux") {
    if (!r.glibc) throw refusal(r, "the Linux binaries need glibc (musl is not supported)");
    if (older(r.glibc, build.minGlibc)) throw refusal(r, `the Node ${major} binary needs glibc >= ${build.minGlibc}`);
  }
  return build.pkg;
}

export function currentRuntime(): Runtime {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return { node: process.version, platform: process.platform, arch: process.arch, glibc: header?.glibcVersionRuntime ?? null };
}

let loaded: Promise<Uws> | undefined;

/** Loads the uWS build for this runtime once; a failure is the one-line refusal. */
export function loadUws(): Promise<Uws> {
  loaded ??= (async () => {
    const r = currentRuntime();
    const pkg = uwsPackageFor(r);
    try {
      return (await import(pkg)) as Uws;
    } catch (err) {
      throw refusal(r, `${pkg} did not load (${String((err as Error).message).split("\n").filter(Boolean).pop()})`);
    }
  })();
  return loaded;
}
