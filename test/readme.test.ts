// The README's configuration table and API overview are read off the code; keep them true.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { options } from "../src/config.js";
import { routes } from "../src/routes.js";

const readme = readFileSync(path.resolve(__dirname, "../README.md"), "utf8");

describe("README", () => {
  it("documents every configuration option", () => {
    for (const o of options) expect(readme).toContain(`\`--${o.key}\``);
  });

  it("lists every route of the route table", () => {
    for (const r of routes) expect(readme).toContain(`${r.method} ${r.path}`);
  });

  it("shows the quick start and test commands", () => {
    for (const c of ["npm ci", "npm start", "npm test"]) expect(readme).toContain(c);
  });
});
