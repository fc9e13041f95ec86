// The Quiver console: plain DOM, no framework. Every view is a function of the URL's hash; data
// comes from the server's own API with the signed-in key (kept in sessionStorage, sent as
// x-api-key, never in a URL or a cookie). Query results arrive as Arrow IPC and are read with
// apache-arrow's browser build (loaded by index.html as the global `Arrow`).
import { parseMetrics, replicaRates, sum } from "./metrics-rates.js";

interface ArrowTable {
  schema: { fields: { name: string }[] };
  numRows: number;
  get(i: number): Record<string, unknown> | null;
}
declare const Arrow: { tableFromIPC(bytes: Uint8Array): ArrowTable };

interface JsonType {
  type: string;
  fields?: JsonField[];
  length?: number;
}
interface JsonField {
  name: string;
  type: JsonType;
  nullable: boolean;
}
interface Job {
  job_id: string;
  table: string;
  job_type: string;
  status: string;
  created_at_millis: number;
}

const KEY_SLOT = "quiver.apiKey";
const SEP = "$";

let apiKey: string | null = sessionStorage.getItem(KEY_SLOT);
/** Timers of the current view, stopped when the view changes. */
let timers: number[] = [];

// ---- DOM helpers -------------------------------------------------------------------------------

type Child = Node | string | null | undefined | false;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | boolean | ((e: Event) => void)> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false) el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

const $ = <T extends HTMLElement>(sel: string, root: ParentNode = document) => root.querySelector(sel) as T;
const main = () => $<HTMLElement>("#main");

function table(headers: string[], rows: Child[][], label: string): HTMLElement {
  return h(
    "div",
    { class: "scroll" },
    h("table", { "aria-label": label }, h("thead", {}, h("tr", {}, ...headers.map((x) => h("th", { scope: "col" }, x)))), h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c)))))),
  );
}

function props(entries: [string, Child][]): HTMLElement {
  const dl = h("dl", { class: "props" });
  for (const [k, v] of entries) dl.append(h("dt", {}, k), h("dd", {}, v));
  return dl;
}

// ---- the API -----------------------------------------------------------------------------------

class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** The error in words: what the status means, then the server's own `detail`. */
function explain(err: unknown): string {
  if (!(err instanceof ApiFailure)) return `Cannot reach the server: ${(err as Error)?.message ?? String(err)}`;
  const d = err.detail;
  switch (err.status) {
    case 401:
      return `Not signed in, or the key was not accepted (401): ${d}`;
    case 403:
      return `Not allowed (403): ${d}. This key's role or namespaces do not permit this; sign in with a key that has the role named.`;
    case 404:
      return `Not found (404): ${d}`;
    case 409:
      return `Conflict (409): ${d}`;
    case 503:
      return `The server is busy (503): ${d}. Try again shortly.`;
    default:
      return `Request failed (${err.status}): ${d}`;
  }
}

function showError(err: unknown): void {
  // A key that stopped working (revoked, or the server restarted with other keys): sign in again.
  if (err instanceof ApiFailure && err.status === 401 && apiKey) {
    forget();
    stopTimers();
    signIn();
  }
  const box = $<HTMLElement>("#error");
  box.textContent = explain(err);
  box.hidden = false;
}

function clearError(): void {
  const box = $<HTMLElement>("#error");
  box.hidden = true;
  box.textContent = "";
}

async function api(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = {};
  if (apiKey) headers["x-api-key"] = apiKey;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    let detail = res.statusText;
    try {
      const j = (await res.json()) as { detail?: string };
      if (j.detail) detail = j.detail;
    } catch {
      // not a JSON error body: keep the status text
    }
    throw new ApiFailure(res.status, detail);
  }
  return res;
}

const call = async <T = any>(method: string, path: string, body?: unknown): Promise<T> => (await api(method, path, body)).json() as Promise<T>;

/** Path segment of an object id (the root namespace is the bare delimiter). */
const idPath = (id: string[]) => encodeURIComponent(id.length ? id.join(SEP) : SEP);
const idText = (id: string[]) => (id.length ? id.join(".") : "(root)");
const hashId = (id: string[]) => id.map(encodeURIComponent).join("/");

/** Run a section's loader, showing its failure in words inside the section. */
async function section(el: HTMLElement, load: () => Promise<Child>): Promise<void> {
  el.setAttribute("aria-busy", "true");
  try {
    const content = await load();
    el.replaceChildren(...(content !== null && content !== undefined && content !== false ? [content] : []));
  } catch (err) {
    el.replaceChildren(h("p", { class: "error", role: "alert" }, explain(err)));
  } finally {
    el.removeAttribute("aria-busy");
  }
}

// ---- values -------------------------------------------------------------------------------------

function formatValue(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(6);
  if (typeof v === "object" && typeof (v as { toArray?: unknown }).toArray === "function") {
    const a = Array.from((v as { toArray(): ArrayLike<unknown> }).toArray());
    const shown = a.slice(0, 6).map(formatValue).join(", ");
    return `[${shown}${a.length > 6 ? `, … (${a.length})` : ""}]`;
  }
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object") return JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x));
  return String(v);
}

function vectorOf(v: unknown): number[] | null {
  if (v && typeof v === "object" && typeof (v as { toArray?: unknown }).toArray === "function") {
    return Array.from((v as { toArray(): ArrayLike<number> }).toArray(), Number);
  }
  return null;
}

/** Fields as rows: nested fields indented under their parent, with the path to name them by. */
function flatten(fields: JsonField[], prefix = "", depth = 0): { path: string; depth: number; field: JsonField }[] {
  return fields.flatMap((f) => {
    const path = prefix ? `${prefix}.${f.name}` : f.name;
    const kids = f.type.type === "struct" ? flatten(f.type.fields ?? [], path, depth + 1) : [];
    return [{ path, depth, field: f }, ...kids];
  });
}

function typeText(t: JsonType): string {
  if (t.type === "fixed_size_list") return `fixed_size_list<${typeText(t.fields![0].type)}>[${t.length}]`;
  if (t.type === "list" || t.type === "large_list") return `${t.type}<${typeText(t.fields![0].type)}>`;
  return t.type;
}

/**
 * A nested field's indentation, through the element's style object: the page's Content-Security-Policy
 * (style-src 'self') refuses inline style attributes, not styles set from its own script.
 */
function indented<E extends HTMLElement>(el: E, depth: number): E {
  el.style.paddingLeft = `${depth * 1.2}rem`;
  return el;
}

const isVectorField = (f: JsonField) => f.type.type === "fixed_size_list" && /float|halffloat|double/.test(f.type.fields?.[0]?.type.type ?? "");

// ---- pages --------------------------------------------------------------------------------------

function page(title: string, ...children: Child[]): void {
  const m = main();
  m.replaceChildren(h("h1", { tabindex: "-1" }, title), ...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false));
  $<HTMLElement>("h1", m).focus();
  document.title = `${title} · Quiver console`;
}

function signIn(): void {
  $<HTMLElement>("#nav").hidden = true;
  const input = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true, "aria-describedby": "key-help" });
  const form = h(
    "form",
    { class: "grid", "aria-label": "Sign in" },
    h("label", { for: "api-key" }, "API key"),
    input,
    h("p", { id: "key-help", class: "muted help" }, "The key is kept in this browser tab only and sent as the x-api-key header."),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    apiKey = input.value.trim();
    try {
      await call("GET", `/v1/namespace/${idPath([])}/list?limit=1`);
      sessionStorage.setItem(KEY_SLOT, apiKey);
      location.hash = "#/tables";
    } catch (err) {
      apiKey = null;
      showError(err);
    }
  });
  page("Sign in to Quiver", form);
  input.focus();
}

async function children(id: string[]): Promise<{ namespaces: string[]; tables: string[] }> {
  const [ns, ts] = await Promise.all([
    call<{ namespaces: string[] }>("GET", `/v1/namespace/${idPath(id)}/list`),
    call<{ tables: string[] }>("GET", `/v1/namespace/${idPath(id)}/table/list`),
  ]);
  return { namespaces: ns.namespaces, tables: ts.tables };
}

async function treeLevel(id: string[], panel: HTMLElement): Promise<HTMLElement> {
  const { namespaces, tables } = await children(id);
  const ul = h("ul", { class: id.length ? "" : "tree", role: id.length ? "group" : "list" });
  for (const name of namespaces) {
    const child = [...id, name];
    const sub = h("div", { hidden: true });
    const toggle = h("button", { type: "button", class: "toggle", "aria-expanded": "false", "aria-label": `Expand ${idText(child)}` }, "▸");
    toggle.addEventListener("click", async () => {
      const open = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", String(!open));
      toggle.setAttribute("aria-label", `${open ? "Expand" : "Collapse"} ${idText(child)}`);
      toggle.textContent = open ? "▸" : "▾";
      sub.hidden = open;
      if (!open && !sub.firstChild) await section(sub, () => treeLevel(child, panel));
    });
    const show = h("button", { type: "button", class: "secondary", title: "Show the namespace's properties" }, h("span", { "aria-hidden": "true" }, "📁 "), name);
    show.addEventListener("click", () =>
      section(panel, async () => {
        const d = await call<{ properties?: Record<string, string> }>("POST", `/v1/namespace/${idPath(child)}/describe`, {});
        const entries = Object.entries(d.properties ?? {});
        return h("div", {}, h("h2", {}, `Namespace ${idText(child)}`), entries.length ? props(entries) : h("p", { class: "muted" }, "No properties."));
      }),
    );
    ul.append(h("li", {}, toggle, show, sub));
  }
  for (const name of tables) {
    const child = [...id, name];
    ul.append(h("li", {}, h("span", { class: "toggle", "aria-hidden": "true" }, "  "), h("a", { href: `#/table/${hashId(child)}` }, h("span", { "aria-hidden": "true" }, "▦ "), name)));
  }
  if (!namespaces.length && !tables.length) ul.append(h("li", { class: "muted" }, "(empty)"));
  return ul;
}

function tablesPage(): void {
  const tree = h("div", { "aria-label": "Namespaces and tables" });
  const panel = h("section", { "aria-live": "polite" });
  page("Namespaces and tables", h("p", { class: "muted" }, "Expand a namespace with its arrow button; choose a namespace to see its properties, a table to open it."), tree, panel);
  void section(tree, () => treeLevel([], panel));
}

async function tablePage(id: string[]): Promise<void> {
  const p = `/v1/table/${idPath(id)}`;
  const parts = ["schema", "rows", "stats", "versions", "branches", "indexes"].map((k) => [k, h("section", { id: `sec-${k}` })] as const);
  const sec = Object.fromEntries(parts) as Record<string, HTMLElement>;
  page(
    `Table ${idText(id)}`,
    h("p", {}, h("a", { href: `#/query/${hashId(id)}` }, "Query this table"), " · ", h("a", { href: "#/jobs" }, "Jobs and index builds")),
    h("h2", {}, "Schema"),
    sec.schema,
    h("h2", {}, "Rows and stats"),
    sec.rows,
    sec.stats,
    h("h2", {}, "Versions and tags"),
    sec.versions,
    h("h2", {}, "Branches"),
    sec.branches,
    h("h2", {}, "Indexes"),
    sec.indexes,
  );
  const described = call<{ schema?: { fields: JsonField[] }; version?: number; location?: string }>("POST", `${p}/describe`, {});
  void section(sec.schema, async () => {
    const d = await described;
    const rows = flatten(d.schema?.fields ?? []).map(({ path, depth, field }) => [indented(h("code", {}, depth ? path.split(".").pop()! : path), depth), typeText(field.type), field.nullable ? "yes" : "no"]);
    return h("div", {}, h("p", {}, `Latest version ${d.version ?? "—"}`), table(["Field", "Type", "Nullable"], rows, "Schema"));
  });
  void section(sec.rows, async () => h("p", {}, h("strong", {}, "Rows: "), String(await call<number>("POST", `${p}/count_rows`, {}))));
  void section(sec.stats, async () => {
    const s = await call<{ total_bytes: number; num_rows: number; num_indices: number; fragment_stats: { num_fragments: number; num_small_fragments: number } }>("POST", `${p}/stats`, {});
    return props([
      ["Bytes on disk", s.total_bytes.toLocaleString()],
      ["Rows", s.num_rows.toLocaleString()],
      ["Indexes", String(s.num_indices)],
      ["Fragments", `${s.fragment_stats.num_fragments} (${s.fragment_stats.num_small_fragments} small)`],
    ]);
  });
  void section(sec.versions, async () => {
    const [v, t] = await Promise.all([
      call<{ versions: { version: number; timestamp_millis: number }[] }>("POST", `${p}/version/list?descending=true&limit=50`),
      call<{ tags: Record<string, { version: number; branch?: string }> }>("POST", `${p}/tags/list`),
    ]);
    const tagsAt = new Map<number, string[]>();
    for (const [name, tag] of Object.entries(t.tags)) if (!tag.branch) tagsAt.set(tag.version, [...(tagsAt.get(tag.version) ?? []), name]);
    return table(
      ["Version", "Committed", "Tags"],
      v.versions.map((x) => [String(x.version), new Date(x.timestamp_millis).toLocaleString(), (tagsAt.get(x.version) ?? []).join(", ")]),
      "Versions",
    );
  });
  void section(sec.branches, async () => {
    const b = await call<{ branches: Record<string, { parentBranch?: string; parentVersion: number }> }>("POST", `${p}/branches/list`);
    const rows = Object.entries(b.branches).map(([name, x]) => [name, x.parentBranch ?? "main", String(x.parentVersion)]);
    return rows.length ? table(["Branch", "From branch", "From version"], rows, "Branches") : h("p", { class: "muted" }, "Only the main branch.");
  });
  const indexList = h("div");
  sec.indexes.append(indexList);
  const loadIndexes = () =>
    section(indexList, async () => {
      const r = await call<{ indexes: { index_name: string; columns: string[]; index_type: string; status: string; num_indexed_rows?: number | null; num_unindexed_rows?: number | null }[] }>("POST", `${p}/index/list`, {});
      return r.indexes.length
        ? table(
            ["Name", "Columns", "Type", "Status", "Indexed rows", "Unindexed rows"],
            r.indexes.map((i) => [i.index_name, i.columns.join(", "), i.index_type, h("span", { class: `badge state-${i.status}` }, i.status), String(i.num_indexed_rows ?? "—"), String(i.num_unindexed_rows ?? "—")]),
            "Indexes",
          )
        : h("p", { class: "muted" }, "No indexes.");
    });
  const d = await described.catch(() => null);
  sec.indexes.append(indexForm(p, d?.schema?.fields ?? [], loadIndexes), maintainNow(p));
  void loadIndexes();
}

/** Queue table maintenance (compaction, index upkeep, version cleanup) now; needs the write role. */
function maintainNow(p: string): HTMLElement {
  const status = h("p", { role: "status" });
  const button = h("button", { type: "button", class: "secondary" }, "Maintain now");
  button.addEventListener("click", async () => {
    clearError();
    try {
      const r = await call<{ job_id: string }>("POST", `${p}/optimize`, {});
      status.replaceChildren("Maintenance started as job ", h("code", {}, r.job_id), ". ", h("a", { href: "#/jobs" }, "Follow it on the Jobs page"), ".");
    } catch (err) {
      showError(err);
    }
  });
  return h("div", {}, h("h3", {}, "Maintenance"), h("p", { class: "muted" }, "Compacts small fragments, adds new rows to the indexes and removes old versions (see docs/maintenance.md)."), button, status);
}

function indexForm(p: string, fields: JsonField[], reload: () => void): HTMLElement {
  // A vector column first, with a vector index: the form's defaults make the index a table is most likely built for.
  const all = flatten(fields);
  const vector = all.find((f) => isVectorField(f.field));
  const column = h("select", { id: "index-column" }, ...all.map((f) => h("option", { value: f.path, selected: f === vector }, f.path)));
  const kind = h("select", { id: "index-type" }, ...["IVF_PQ", "IVF_FLAT", "IVF_HNSW_SQ", "BTREE", "BITMAP", "LABEL_LIST", "FTS"].map((k) => h("option", { value: k, selected: k === (vector ? "IVF_PQ" : "BTREE") }, k)));
  const name = h("input", { id: "index-name", placeholder: "default: <column>_idx" });
  const status = h("p", { role: "status" });
  const form = h(
    "form",
    { class: "grid", "aria-label": "Create an index" },
    h("label", { for: "index-column" }, "Column"),
    column,
    h("label", { for: "index-type" }, "Index type"),
    kind,
    h("label", { for: "index-name" }, "Name"),
    name,
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Create index")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    try {
      const body: Record<string, unknown> = { column: column.value, index_type: kind.value };
      if (name.value.trim()) body.name = name.value.trim();
      const r = await call<{ transaction_id: string }>("POST", `${p}/create_index`, body);
      status.replaceChildren("Index build started as transaction ", h("code", {}, r.transaction_id), ". ", h("a", { href: "#/jobs" }, "Follow it on the Jobs page"), ".");
      reload();
    } catch (err) {
      showError(err);
    }
  });
  return h("div", {}, h("h3", {}, "Create an index"), form, status);
}

// ---- query playground ---------------------------------------------------------------------------

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

async function queryPage(id: string[]): Promise<void> {
  const tableSel = h("select", { id: "q-table" });
  const vector = h("textarea", { id: "q-vector", placeholder: "[0.1, 0.2, …]", rows: "3" });
  const vectorColumn = h("select", { id: "q-vector-column" });
  const rowNo = h("input", { id: "q-row", type: "number", min: "0", value: "0", class: "narrow" });
  const takeRow = h("button", { type: "button", class: "secondary" }, "Take vector from row");
  const fts = h("input", { id: "q-fts", placeholder: "words to search for" });
  const filter = h("input", { id: "q-filter", placeholder: "e.g. category = 'a' AND id > 10" });
  const columns = h("input", { id: "q-columns", placeholder: "all columns (or: id, text)" });
  const k = h("input", { id: "q-k", type: "number", min: "1", value: "10", class: "narrow" });
  const curl = h("pre", { id: "q-curl", "aria-label": "The request as a curl command" });
  const copy = h("button", { type: "button", class: "secondary" }, "Copy curl command");
  const results = h("section", { id: "q-results", "aria-live": "polite" });
  const form = h(
    "form",
    { class: "grid", "aria-label": "Query" },
    h("label", { for: "q-table" }, "Table"),
    tableSel,
    h("label", { for: "q-vector" }, "Vector (JSON array)"),
    vector,
    h("label", { for: "q-vector-column" }, "Vector column"),
    h("div", {}, vectorColumn, " ", h("label", { for: "q-row" }, "row "), rowNo, " ", takeRow),
    h("label", { for: "q-fts" }, "Full-text query"),
    fts,
    h("label", { for: "q-filter" }, "Filter (SQL)"),
    filter,
    h("label", { for: "q-columns" }, "Columns"),
    columns,
    h("label", { for: "q-k" }, "k (rows)"),
    k,
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Run query")),
  );
  page("Query playground", form, h("h2", {}, "Request"), curl, copy, h("h2", {}, "Results"), results);

  const target = () => tableSel.value.split(SEP);
  const body = (): Record<string, unknown> => {
    const b: Record<string, unknown> = { k: Number(k.value) || 10 };
    const v = vector.value.trim();
    if (v) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(v);
      } catch {
        throw new Error("Vector: not a JSON array of numbers");
      }
      if (!Array.isArray(parsed) || parsed.some((x) => typeof x !== "number")) throw new Error("Vector: must be a JSON array of numbers, e.g. [0.1, 0.2]");
      b.vector = parsed;
      if (vectorColumn.value) b.vector_column = vectorColumn.value;
    }
    if (fts.value.trim()) b.full_text_query = { string_query: { query: fts.value.trim() } };
    if (filter.value.trim()) b.filter = filter.value.trim();
    const cols = columns.value.split(",").map((c) => c.trim()).filter(Boolean);
    if (cols.length) b.columns = cols;
    return b;
  };
  const showCurl = () => {
    let b: Record<string, unknown>;
    try {
      b = body();
    } catch (err) {
      curl.textContent = (err as Error).message;
      return;
    }
    curl.textContent = [
      `curl -sS -X POST ${shellQuote(`${location.origin}/v1/table/${idPath(target())}/query`)} \\`,
      `  -H "x-api-key: $QUIVER_API_KEY" -H 'content-type: application/json' \\`,
      `  --data ${shellQuote(JSON.stringify(b))} \\`,
      `  -o result.arrow`,
    ].join("\n");
  };
  form.addEventListener("input", showCurl);
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(curl.textContent ?? "");
      copy.textContent = "Copied";
    } catch {
      // No clipboard permission (e.g. not a secure context): select the text for Ctrl+C instead.
      getSelection()?.selectAllChildren(curl);
      copy.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => (copy.textContent = "Copy curl command"), 2000);
  });

  const loadColumns = async () => {
    vectorColumn.replaceChildren();
    try {
      const d = await call<{ schema?: { fields: JsonField[] } }>("POST", `/v1/table/${idPath(target())}/describe`, {});
      for (const f of flatten(d.schema?.fields ?? []).filter((x) => isVectorField(x.field))) vectorColumn.append(h("option", { value: f.path }, f.path));
    } catch (err) {
      showError(err);
    }
    showCurl();
  };
  tableSel.addEventListener("change", () => void loadColumns());

  takeRow.addEventListener("click", async () => {
    clearError();
    try {
      const col = vectorColumn.value;
      if (!col) throw new Error("This table has no vector column to take a vector from");
      const t = await arrowQuery(target(), { k: 1, offset: Number(rowNo.value) || 0, columns: [col] });
      const v = t.numRows ? vectorOf(t.get(0)?.[col]) : null;
      if (!v) throw new Error(`Row ${rowNo.value} has no vector in ${col}`);
      vector.value = JSON.stringify(v.map((x) => Math.round(x * 1e6) / 1e6));
      showCurl();
    } catch (err) {
      showError(err);
    }
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    await section(results, async () => {
      const t = await arrowQuery(target(), body());
      const names = t.schema.fields.map((f) => f.name);
      const rows: Child[][] = [];
      for (let i = 0; i < t.numRows; i++) {
        const r = t.get(i)!;
        rows.push(names.map((n) => formatValue(r[n])));
      }
      return h("div", {}, h("p", {}, `${t.numRows} row${t.numRows === 1 ? "" : "s"}`), table(names, rows, "Query results"));
    });
  });

  try {
    const all = await call<{ tables: string[] }>("GET", "/v1/table");
    for (const name of all.tables) tableSel.append(h("option", { value: name }, name.split(SEP).join(".")));
    if (id.length) {
      const want = id.join(SEP);
      if (!all.tables.includes(want)) tableSel.append(h("option", { value: want }, idText(id)));
      tableSel.value = want;
    }
  } catch (err) {
    showError(err);
  }
  await loadColumns();
}

async function arrowQuery(id: string[], body: Record<string, unknown>): Promise<ArrowTable> {
  const res = await api("POST", `/v1/table/${idPath(id)}/query`, body);
  return Arrow.tableFromIPC(new Uint8Array(await res.arrayBuffer()));
}

// ---- jobs ---------------------------------------------------------------------------------------

const KIND_NAMES: Record<string, string> = { create_index: "Index build", backfill: "Backfill", refresh_materialized_view: "View refresh", maintenance: "Maintenance" };
const active = (status: string) => status === "Queued" || status === "Running";

function jobsPage(): void {
  const body = h("tbody");
  const status = h("p", { role: "status" });
  const kindSel = h("select", { id: "jobs-kind" }, h("option", { value: "" }, "All kinds"), ...Object.entries(KIND_NAMES).map(([v, n]) => h("option", { value: v }, n)));
  page(
    "Jobs and index builds",
    h("p", {}, h("label", { for: "jobs-kind" }, "Show "), kindSel),
    h("div", { class: "scroll" }, h("table", { "aria-label": "Jobs" }, h("thead", {}, h("tr", {}, ...["Kind", "Table", "State", "Progress", "Submitted", "Action"].map((x) => h("th", { scope: "col" }, x)))), body)),
    status,
  );
  const rows = new Map<string, { tr: HTMLTableRowElement; state: HTMLElement; progress: HTMLElement; action: HTMLElement; status: string }>();

  async function cancel(job: Job, button: HTMLButtonElement) {
    clearError();
    button.disabled = true;
    try {
      await call("POST", `/v1/transaction/${encodeURIComponent(job.job_id)}/alter`, { actions: [{ setStatusAction: { status: "Canceled" } }] });
      status.textContent = `${KIND_NAMES[job.job_type] ?? job.job_type} on ${job.table} canceled.`;
      await refresh();
    } catch (err) {
      button.disabled = false;
      showError(err);
    }
  }

  async function progressOf(job: Job): Promise<HTMLElement> {
    if (job.status === "Succeeded") return h("progress", { value: "1", max: "1", "aria-label": "done" });
    if (!active(job.status)) return h("span", { class: "muted" }, "—");
    if (job.status === "Queued") return h("progress", { "aria-label": "waiting to start" });
    const d = await call<{ properties: Record<string, string> }>("POST", `/v1/transaction/${encodeURIComponent(job.job_id)}/describe`, {});
    const done = Number(d.properties.rows_done);
    const total = Number(d.properties.rows_total);
    if (total > 0 && Number.isFinite(done)) {
      return h("span", {}, h("progress", { value: String(done), max: String(total), "aria-label": `${done} of ${total} rows` }), ` ${Math.floor((100 * done) / total)}%`);
    }
    const ms = Number(d.properties.duration_ms);
    return h("span", {}, h("progress", { "aria-label": "running" }), Number.isFinite(ms) ? ` ${Math.round(ms / 1000)} s` : "");
  }

  async function refresh() {
    const r = await call<{ jobs: Job[] }>("POST", "/v1/jobs/list", { limit: 100 });
    const jobs = r.jobs.filter((j) => !kindSel.value || j.job_type === kindSel.value);
    const seen = new Set<string>();
    for (const job of jobs) {
      seen.add(job.job_id);
      let row = rows.get(job.job_id);
      if (!row) {
        const state = h("td");
        const progress = h("td");
        const action = h("td");
        const tr = h("tr", { "data-job": job.job_id }, h("td", {}, KIND_NAMES[job.job_type] ?? job.job_type), h("td", {}, job.table), state, progress, h("td", {}, new Date(job.created_at_millis).toLocaleTimeString()), action);
        row = { tr, state, progress, action, status: "" };
        rows.set(job.job_id, row);
      }
      body.append(row.tr); // keeps the list in the server's order (newest first)
      if (row.status !== job.status || active(job.status)) {
        row.state.replaceChildren(h("span", { class: `badge state-${job.status}` }, job.status));
        row.progress.replaceChildren(await progressOf(job).catch(() => h("span", {}, "?")));
      }
      if (row.status !== job.status) {
        // Rebuilt only when the state changes, so a focused Cancel button keeps its focus.
        const button = h("button", { type: "button", class: "danger", "aria-label": `Cancel ${KIND_NAMES[job.job_type] ?? job.job_type} on ${job.table}` }, "Cancel");
        button.addEventListener("click", () => void cancel(job, button));
        row.action.replaceChildren(active(job.status) ? button : "");
        row.status = job.status;
      }
    }
    for (const [id, row] of rows) if (!seen.has(id)) (row.tr.remove(), rows.delete(id));
    if (!jobs.length && !body.firstChild) status.textContent = "No jobs yet.";
  }

  kindSel.addEventListener("change", () => void refresh().catch(showError));
  const tick = () => void refresh().catch(showError);
  tick();
  timers.push(window.setInterval(tick, 1000));
}

// ---- server -------------------------------------------------------------------------------------

const WIDTH = 600;
const HEIGHT = 180;
const POINTS = 60;
const SVG = "http://www.w3.org/2000/svg";

/** One series, scaled to its own maximum; samples not taken yet (or without requests) are gaps. */
function polyline(values: (number | null)[], cls: string): SVGPolylineElement {
  const line = document.createElementNS(SVG, "polyline");
  const max = Math.max(1e-9, ...values.map((v) => v ?? 0));
  const pts: string[] = [];
  values.forEach((v, i) => {
    if (v !== null) pts.push(`${((i / (POINTS - 1)) * WIDTH).toFixed(1)},${(HEIGHT - 4 - (v / max) * (HEIGHT - 8)).toFixed(1)}`);
  });
  line.setAttribute("points", pts.join(" "));
  line.setAttribute("class", cls);
  return line;
}

const peak = (values: (number | null)[]) => Math.max(0, ...values.map((v) => v ?? 0));

function serverPage(): void {
  const cards = h("div", { class: "cards" });
  const chart = document.createElementNS(SVG, "svg");
  chart.setAttribute("class", "chart");
  chart.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  chart.setAttribute("width", String(WIDTH));
  chart.setAttribute("height", String(HEIGHT));
  chart.setAttribute("role", "img");
  const summary = h("p", { id: "chart-summary", class: "muted" });
  const scale = h("p", { class: "muted" });
  page(
    "Server",
    cards,
    h("h2", {}, "Requests per second and p99 latency"),
    h("p", {}, h("span", { class: "legend-qps" }, "— requests/s"), "   ", h("span", { class: "legend-p99" }, "- - p99 ms"), h("span", { class: "muted" }, " (of the replica that answered each scrape, since its previous one; each scaled to its own maximum; one point every 2 s)")),
    scale,
    chart,
    summary,
  );
  const qps: (number | null)[] = Array(POINTS).fill(null);
  const lat: (number | null)[] = Array(POINTS).fill(null);
  const rates = replicaRates();

  const card = (label: string, value: string) => h("div", { class: "card" }, h("div", { class: "muted" }, label), h("div", { class: "value" }, value));

  async function tick() {
    const text = await (await api("GET", "/metrics")).text();
    const m = parseMetrics(text);
    const { replica, qps: rate, p99Ms } = rates(m, performance.now());
    qps.push(rate);
    lat.push(p99Ms);
    qps.shift();
    lat.shift();
    const lastQps = qps[POINTS - 1];
    const lastP99 = lat[POINTS - 1];
    cards.replaceChildren(
      card("Replica", replica || "?"),
      card("In flight", String(sum(m, "quiver_requests_in_flight"))),
      card("Requests/s", lastQps === null ? "…" : lastQps.toFixed(1)),
      card("p99 latency", lastP99 === null ? "—" : `${lastP99.toFixed(1)} ms`),
      card("Pool threads busy", `${sum(m, "quiver_pool_threads_busy")} / ${sum(m, "quiver_pool_threads_max")} (${sum(m, "quiver_pool_threads")} started)`),
      card("Pool queue", String(sum(m, "quiver_pool_queue_length"))),
      card("Jobs running", String(sum(m, "quiver_jobs", (l) => l.state === "Running"))),
      card("Open tables", String(sum(m, "quiver_open_table_handles"))),
      card("Memory (RSS)", `${(sum(m, "process_resident_memory_bytes") / 2 ** 20).toFixed(0)} MiB`),
      card("Event-loop delay p99", `${(sum(m, "nodejs_eventloop_lag_p99_seconds") * 1000).toFixed(1)} ms`),
      card("503s", String(sum(m, "quiver_unavailable_total"))),
    );
    chart.replaceChildren(polyline(qps, "qps"), polyline(lat, "p99"));
    scale.textContent = `Top of the chart: ${peak(qps).toFixed(1)} requests/s, ${peak(lat).toFixed(1)} ms.`;
    const words = `Latest: ${lastQps === null ? "no rate yet" : `${lastQps.toFixed(1)} requests/s`}, p99 ${lastP99 === null ? "not measured (no requests)" : `${lastP99.toFixed(1)} ms`}.`;
    chart.setAttribute("aria-label", `Chart of requests per second and p99 latency over the last two minutes. ${words}`);
    summary.textContent = words;
  }
  const run = () => void tick().catch(showError);
  run();
  timers.push(window.setInterval(run, 2000));
}

// ---- routing ------------------------------------------------------------------------------------

function stopTimers(): void {
  for (const t of timers) clearInterval(t);
  timers = [];
}

function forget(): void {
  apiKey = null;
  sessionStorage.removeItem(KEY_SLOT);
}

function route(): void {
  stopTimers();
  clearError();
  if (!apiKey) return signIn();
  $<HTMLElement>("#nav").hidden = false;
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const id = rest.filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll<HTMLAnchorElement>("#nav a")) {
    if (a.getAttribute("href") === `#/${name === "table" ? "tables" : name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  switch (name) {
    case "table":
      return void tablePage(id);
    case "query":
      return void queryPage(id);
    case "jobs":
      return jobsPage();
    case "server":
      return serverPage();
    default:
      return tablesPage();
  }
}

$<HTMLButtonElement>("#sign-out").addEventListener("click", () => {
  forget();
  location.hash = "#/signin";
  route();
});
addEventListener("hashchange", route);
route();
