// docs/alerts.yml, the example alerting rules of docs/operations.md: every rule is complete, and
// every Quiver or Node series a rule reads is one a server declares in /metrics, so a renamed
// series cannot leave a rule that never fires.
import { readFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import YAML from "yaml";
import { serverForFile } from "./helpers/quiver.js";

const q = serverForFile();

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  annotations: { summary: string };
}

const rules = (YAML.parse(readFileSync(path.resolve(__dirname, "../docs/alerts.yml"), "utf8")) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/** The metric families an expression reads (a histogram's _bucket, _sum and _count are its own family). */
const familiesOf = (expr: string) => [...expr.matchAll(/\b((?:quiver|nodejs|process)_[a-z0-9_]+)/g)].map((m) => m[1].replace(/_(bucket|sum|count)$/, ""));

it("every rule has a name, an expression and a summary; the names are unique", () => {
  expect(rules.length).toBeGreaterThan(10);
  for (const r of rules) {
    expect(r.alert).toMatch(/^Quiver[A-Za-z]+$/);
    expect(r.expr.trim().length).toBeGreaterThan(0);
    expect(r.annotations.summary.length).toBeGreaterThan(10);
  }
  expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
});

it("every series the rules read is declared by a server's /metrics", async () => {
  const declared = new Set([...(await q.call("GET", "/metrics")).text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
  const read = new Set(rules.flatMap((r) => familiesOf(r.expr)));
  expect(read.size).toBeGreaterThan(8);
  expect([...read].filter((f) => !declared.has(f))).toEqual([]);
});
