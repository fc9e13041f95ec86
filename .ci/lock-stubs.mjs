#!/usr/bin/env node
// Add lock entries for optional platform packages the registry mirror does not serve, so that
// `npm ci` accepts the lock; their os/cpu/libc say they never install on linux-x64-glibc.
import fs from "node:fs";
const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
const pk = lock.packages;
const osOf = (n) => ["darwin","linux","win32","android","freebsd","openbsd","openharmony"].find((o) => n.includes(o));
const cpuOf = (n) => (n.includes("arm64") ? "arm64" : n.includes("arm-") || n.endsWith("-arm") ? "arm" : n.includes("ia32") ? "ia32" : n.includes("loong64") ? "loong64" : n.includes("ppc64") ? "ppc64" : n.includes("riscv64") ? "riscv64" : n.includes("s390x") ? "s390x" : "x64");
let added = 0;
for (const [path, meta] of Object.entries(pk)) {
  for (const [dep, ver] of Object.entries(meta.optionalDependencies ?? {})) {
    const key = "node_modules/" + dep;
    if (pk[key] || !/(darwin|linux|win32|android|freebsd|openbsd|openharmony)/.test(dep)) continue;
    const entry = { version: ver, cpu: [cpuOf(dep)], optional: true, os: [osOf(dep)] };
    if (/musl/.test(dep)) entry.libc = ["musl"];
    else if (/-gnu/.test(dep) && osOf(dep) === "linux") entry.libc = ["glibc"];
    if (meta.dev) entry.dev = true;
    pk[key] = entry;
    added++;
    console.log("stub", key, JSON.stringify(entry));
  }
}
lock.packages = Object.fromEntries(Object.entries(pk).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : 1)));
fs.writeFileSync("package-lock.json", JSON.stringify(lock, null, 2) + "\n");
console.log("added", added);
