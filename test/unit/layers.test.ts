// The layer rule of docs/design.md ("Layers"), checked on the import graph of src/ and workers/:
// a module imports only modules of its own layer or of a lower one, and no import cycle exists.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "../..");

/** Highest layer first; a path belongs to the first entry it starts with. */
const LAYERS: [string, number][] = [
  ["src/main.ts", 16],
  ["src/server.ts", 15],
  ["src/http/", 14],
  ["src/routes.ts", 14],
  ["src/operations/", 13],
  ["src/services.ts", 12],
  ["src/jobs/kinds/", 11],
  ["src/jobs/triggers/", 11],
  ["workers/processes/", 10],
  ["workers/threads/", 8],
  ["src/lifecycle/", 8],
  ["workers/", 9],
  ["src/compute/", 7],
  ["src/serving/", 7],
  ["src/engine/", 6],
  ["src/jobs/", 5],
  ["src/auth/", 4],
  ["src/catalog/", 3],
  ["src/schemas/", 2],
  ["src/errors.ts", 1],
  ["src/log.ts", 1],
  ["src/metrics.ts", 1],
  ["src/config.ts", 1],
  ["src/util/", 1],
];

const layerOf = (rel: string) => {
  const hit = LAYERS.find(([p]) => rel === p || rel.startsWith(p));
  if (!hit) throw new Error(`${rel} is in no layer`);
  return hit[1];
};

function files(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((n) => {
    const rel = `${dir}/${n}`;
    return statSync(path.join(ROOT, rel)).isDirectory() ? files(rel) : rel.endsWith(".ts") ? [rel] : [];
  });
}

/** Every module one file names: static, re-exported, dynamic, type-only, `import()` types, require. */
const specifiersOf = (rel: string) => ts.preProcessFile(readFileSync(path.join(ROOT, rel), "utf8"), true, true).importedFiles.map((f) => f.fileName);

/** Relative imports of one file, as repository paths. */
function importsOf(rel: string): string[] {
  return specifiersOf(rel)
    .filter((f) => f.startsWith("."))
    .map((f) => path.posix.normalize(path.posix.join(path.posix.dirname(rel), f)).replace(/\.js$/, ".ts"));
}

const all = [...files("src"), ...files("workers")];
const graph = new Map(all.map((f) => [f, importsOf(f)]));

/** Every cycle found by a depth-first walk of `g`, as "a → b → a". */
function cyclesOf(g: Map<string, string[]>): string[] {
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (f: string, trail: string[]) => {
    if (state.get(f) === "done") return;
    if (state.get(f) === "open") {
      cycles.push([...trail.slice(trail.indexOf(f)), f].join(" → "));
      return;
    }
    state.set(f, "open");
    for (const to of g.get(f) ?? []) visit(to, [...trail, f]);
    state.set(f, "done");
  };
  for (const f of g.keys()) visit(f, []);
  return cycles;
}

describe("layers", () => {
  it("every module is in a layer and imports only its own or lower layers", () => {
    const upward: string[] = [];
    for (const [from, tos] of graph) {
      for (const to of tos) if (layerOf(to) > layerOf(from)) upward.push(`${from} → ${to}`);
    }
    expect(upward).toEqual([]);
  });

  it("there is no import cycle", () => {
    expect(cyclesOf(graph)).toEqual([]);
  });

  it("there is no import cycle between folders (a top-level file counts as its own folder)", () => {
    const unitOf = (f: string) => (path.posix.dirname(f) === "src" ? f : path.posix.dirname(f) + "/");
    const folders = new Map<string, string[]>();
    for (const [from, tos] of graph) {
      const u = unitOf(from);
      folders.set(u, [...(folders.get(u) ?? []), ...tos.map(unitOf).filter((t) => t !== u)]);
    }
    expect(cyclesOf(folders)).toEqual([]);
  });

  // A subfolder belongs to its top folder here (src/jobs/kinds/ is part of src/jobs/): otherwise a
  // type imported from src/jobs/ by src/compute/, while src/jobs/kinds/ imports src/compute/, hides.
  it("there is no import cycle between top folders of src/ (src/jobs/ with its subfolders)", () => {
    const unitOf = (f: string) => {
      const top = /^src\/[^/]+\//.exec(f)?.[0];
      return top ?? (path.posix.dirname(f) === "src" ? f : path.posix.dirname(f) + "/");
    };
    const folders = new Map<string, string[]>();
    for (const [from, tos] of graph) {
      const u = unitOf(from);
      folders.set(u, [...(folders.get(u) ?? []), ...tos.map(unitOf).filter((t) => t !== u)]);
    }
    expect(cyclesOf(folders)).toEqual([]);
  });

  it("an operation module imports, of src/operations/, only the shared helpers, never another resource's module", () => {
    const shared = ["define", "types", "pagination", "table-ref", "query-spec"].map((n) => `src/operations/${n}.ts`);
    const hits = [...graph]
      .filter(([from]) => from.startsWith("src/operations/"))
      .flatMap(([from, tos]) => tos.filter((to) => to.startsWith("src/operations/") && !shared.includes(to)).map((to) => `${from} → ${to}`));
    expect(hits).toEqual([]);
  });

  // Async context (AsyncLocalStorage, async hooks) hooks every promise of the thread: it cost a
  // search 1.36x d3d149e's main-thread time (docs/performance.md). State a call needs is passed.
  it("no module uses async context (node:async_hooks)", () => {
    const hits = all.filter((f) => specifiersOf(f).some((m) => m === "node:async_hooks" || m === "async_hooks"));
    expect(hits).toEqual([]);
  });

  it("only src/engine/ imports LanceDB, in any form (its types too: elsewhere a table is the engine's TableHandle)", () => {
    const hits = all.filter((f) => !f.startsWith("src/engine/") && specifiersOf(f).some((m) => m === "@lancedb/lancedb" || m.startsWith("@lancedb/")));
    expect(hits).toEqual([]);
  });

  // Types the engine hands out (a TableHandle, a query builder) still carry LanceDB's methods: the
  // type checker finds any used outside src/engine/. Reading fields of LanceDB's results is fine.
  it("only src/engine/ uses the methods of LanceDB's objects (tables, tags, branches, queries, builders)", () => {
    const { options } = ts.parseJsonConfigFileContent(JSON.parse(readFileSync(path.join(ROOT, "tsconfig.json"), "utf8")), ts.sys, ROOT);
    const program = ts.createProgram(all.map((f) => path.join(ROOT, f)), options);
    const checker = program.getTypeChecker();
    const fromLanceDb = (d: ts.Declaration) => /[\\/]@lancedb[\\/]/.test(d.getSourceFile().fileName);
    const hits: string[] = [];
    for (const rel of all.filter((f) => !f.startsWith("src/engine/"))) {
      const sf = program.getSourceFile(path.join(ROOT, rel))!;
      const visit = (n: ts.Node): void => {
        if (ts.isPropertyAccessExpression(n)) {
          const s = checker.getSymbolAtLocation(n.name);
          if (s && s.flags & ts.SymbolFlags.Method && s.declarations?.some(fromLanceDb)) {
            hits.push(`${rel}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}: ${n.getText()}`);
          }
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(hits).toEqual([]);
  }, 120_000);

  it("outside src/serving/, only its face (src/serving/index.ts) is imported", () => {
    const hits = [...graph]
      .filter(([from]) => !from.startsWith("src/serving/"))
      .flatMap(([from, tos]) => tos.filter((to) => to.startsWith("src/serving/") && to !== "src/serving/index.ts").map((to) => `${from} → ${to}`));
    expect(hits).toEqual([]);
  });

  it("src/http/ does not import the route table (it is passed in)", () => {
    const hits = [...graph].filter(([from, tos]) => from.startsWith("src/http/") && tos.includes("src/routes.ts")).map(([from]) => from);
    expect(hits).toEqual([]);
  });
});
