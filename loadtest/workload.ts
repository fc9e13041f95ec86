// Requests of a workload: for request number i, which workload of the mix it is (by weight, from a
// seeded generator, so a run's sequence repeats) and the request itself. Bodies are built per request
// from the sources (vectors and texts taken in turn); JSON serialisation is the only work.
import type { Request } from "./http.js";
import type { Kind, Options, WorkloadSpec } from "./options.js";
import { tablePath, type Sources } from "./sources.js";

export interface Next {
  workload: string;
  req: Request;
}

const ACCEPT = { arrow: "application/vnd.apache.arrow.file", json: "application/json", ndjson: "application/x-ndjson" };

/** The body of a vector search, as the workload (and recall mode) sends it. */
export function vectorQuery(o: Options, vector: number[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    vector,
    k: o.k,
    ...(o.vectorColumn ? { vector_column: o.vectorColumn } : {}),
    ...(o.columns ? { columns: o.columns } : {}),
    ...o.extra,
    ...extra,
  };
}

const ftsQuery = (o: Options, text: string) => ({
  full_text_query: { string_query: { query: text, ...(o.textColumns ? { columns: o.textColumns } : {}) } },
});

/** Replaces `{{vector}}`, `{{text}}`, `{{i}}` and `{{table}}` in a raw workload's body. */
function fill(template: unknown, values: Record<string, unknown>): unknown {
  if (typeof template === "string") {
    const whole = /^\{\{(\w+)\}\}$/.exec(template);
    if (whole && whole[1] in values) return values[whole[1]];
    return template.replace(/\{\{(\w+)\}\}/g, (m, k: string) => (k in values ? String(values[k]) : m));
  }
  if (Array.isArray(template)) return template.map((t) => fill(t, values));
  if (template && typeof template === "object") return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, fill(v, values)]));
  return template;
}

type Build = (i: number) => Request;

function builder(o: Options, s: Sources, w: WorkloadSpec, headers: Record<string, string>): Build {
  const json = { ...headers, "content-type": "application/json" };
  const query = { ...json, accept: ACCEPT[o.accept] };
  const texts = w.text?.length ? w.text : s.text;
  const vec = (i: number) => s.vectors[i % s.vectors.length];
  const text = (i: number) => texts[i % texts.length];
  const filter = w.filter ?? o.filter;
  const post = (op: string, h: Record<string, string>, body: unknown): Request => ({
    method: "POST",
    path: tablePath(o.table, op),
    headers: h,
    body: Buffer.from(JSON.stringify(body)),
  });
  const builders: Record<Kind, () => Build> = {
    vector: () => (i) => post("query", query, vectorQuery(o, vec(i))),
    filtered_vector: () => {
      if (!filter) throw new Error("the filtered_vector workload needs --filter (an SQL predicate)");
      return (i) => post("query", query, vectorQuery(o, vec(i), { filter }));
    },
    fts: () => (i) => post("query", query, { ...ftsQuery(o, text(i)), k: o.k, ...(o.columns ? { columns: o.columns } : {}), ...o.extra }),
    hybrid: () => (i) => post("query", query, vectorQuery(o, vec(i), ftsQuery(o, text(i)))),
    count: () => () => post("count_rows", json, filter ? { predicate: filter } : {}),
    describe: () => () => post("describe", json, {}),
    insert: () => {
      const h = { ...headers, "content-type": s.insertContentType };
      return (i) => ({ method: "POST", path: `${tablePath(o.table, "insert")}?mode=append`, headers: h, body: s.inserts[i % s.inserts.length] });
    },
    raw: () => {
      const path = w.path!.replace(/\{table\}/g, encodeURIComponent(o.table).replace(/%24/g, "$"));
      const h = w.body === undefined ? headers : json;
      return (i) => {
        const body = w.body === undefined ? undefined : fill(w.body, { i, table: o.table, ...(s.vectors.length ? { vector: vec(i) } : {}), ...(texts.length ? { text: text(i) } : {}) });
        return { method: w.method!, path, headers: { ...h, accept: ACCEPT[o.accept] }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)) };
      };
    },
  };
  return builders[w.kind]();
}

/** mulberry32 over the request number: which workload of the mix request i is, the same every run. */
function pick(i: number): number {
  let t = (i * 0x6d2b79f5 + 0x9e3779b9) >>> 0;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** Names workloads by kind, numbered when a kind repeats (vector, vector#2). */
export function workloadNames(ws: WorkloadSpec[]): string[] {
  const seen = new Map<string, number>();
  return ws.map((w) => {
    const n = (seen.get(w.kind) ?? 0) + 1;
    seen.set(w.kind, n);
    return n === 1 ? w.kind : `${w.kind}#${n}`;
  });
}

/** The request generator of a run: request i → its workload's name and request. */
export function requests(o: Options, s: Sources, headers: Record<string, string>): (i: number) => Next {
  const names = workloadNames(o.workloads);
  const builds = o.workloads.map((w) => builder(o, s, w, headers));
  const total = o.workloads.reduce((a, w) => a + w.weight, 0);
  const bounds = o.workloads.map(((acc) => (w: WorkloadSpec) => (acc += w.weight / total))(0));
  if (builds.length === 1) return (i) => ({ workload: names[0], req: builds[0](i) });
  return (i) => {
    const r = pick(i);
    let j = bounds.findIndex((b) => r < b);
    if (j < 0) j = builds.length - 1;
    return { workload: names[j], req: builds[j](i) };
  };
}
