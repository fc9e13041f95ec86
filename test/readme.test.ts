// The docs are read off the code; keep them true: docs/configuration.md lists every option, docs/api.md
// every route, the README's short option table names real options with their defaults, and every
// relative link in the README and docs/ reaches a file and, with an anchor, a heading in it.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { options } from "../src/config.js";
import { routes } from "../src/routes.js";

const ROOT = path.resolve(__dirname, "..");
const read = (rel: string) => readFileSync(path.join(ROOT, rel), "utf8");
const readme = read("README.md");
const markdown = ["README.md", ...readdirSync(path.join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** Text outside fenced code blocks, where `#` lines are comments and `](` is not a link. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "");

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, …. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Rows `| \`--key\` | … | default | …` of a markdown table, the default in column `defaultColumn`. */
function optionRows(text: string, defaultColumn: number): { key: string; def: string }[] {
  return [...text.matchAll(/^\| `--([a-z-]+)` \|(.*)$/gm)].map(([, key, rest]) => ({ key, def: rest.split(" | ")[defaultColumn - 1].trim() }));
}

function expectDefaultsTrue(rows: { key: string; def: string }[]) {
  for (const { key, def } of rows) {
    const option = options.find((o) => o.key === key);
    expect(option, `--${key} is no option of src/config.ts`).toBeDefined();
    // A literal default (`8080`, `on`) must be the code's; words ("core count", "off") describe computed ones.
    const literal = /^`([^`<]+)`$/.exec(def);
    if (literal && option?.def !== undefined) expect(literal[1], `--${key}`).toBe(String(option.def));
  }
}

describe("README and docs", () => {
  it("docs/configuration.md documents every configuration option, each with its default", () => {
    const text = read("docs/configuration.md");
    for (const o of options) expect(text).toContain(`\`--${o.key}\``);
    const rows = optionRows(text, 2);
    expect(rows.map((r) => r.key).sort()).toEqual(options.map((o) => o.key).sort());
    expectDefaultsTrue(rows);
  });

  it("the README's short option table names real options with their defaults, and points to the full one", () => {
    const rows = optionRows(readme, 1);
    expect(rows.length).toBeGreaterThanOrEqual(10);
    expectDefaultsTrue(rows);
    expect(readme).toContain("(docs/configuration.md)");
  });

  it("docs/api.md lists every route of the route table", () => {
    const text = read("docs/api.md");
    for (const r of routes) expect(text).toContain(`${r.method} ${r.path}`);
  });

  it("shows the quick start and test commands", () => {
    for (const c of ["npm ci", "npm start", "npm test"]) expect(readme).toContain(c);
  });

  it("every relative link in the README and docs/ reaches an existing file, and its anchor a heading there", () => {
    const broken: string[] = [];
    for (const file of markdown) {
      for (const [, target] of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const [rel, anchor] = target.split("#");
        const to = rel ? path.join(path.dirname(file), rel) : file;
        if (!existsSync(path.join(ROOT, to))) broken.push(`${file}: ${target} (no such file)`);
        else if (anchor !== undefined && to.endsWith(".md") && !anchorsOf(read(to)).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
