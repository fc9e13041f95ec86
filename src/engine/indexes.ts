// Index builds on LanceDB: which index types exist, which column types and parameters each takes,
// the engine `Index` config built from a validated spec, and LanceDB's error texts turned into
// messages. Everything is checked here BEFORE LanceDB sees it: some bad values abort the process
// (an unknown FTS language) or panic (num_partitions 0, hamming on float vectors).
import * as lancedb from "@lancedb/lancedb";
import type { Entry } from "../catalog/catalog.js";
import { ApiError, Code, invalid } from "../errors.js";
import { errorText, isCommitConflict } from "./messages.js";

/** Arrow type ids (apache-arrow `Type` enum); numbers, so either arrow copy's fields work. */
const T = { Int: 2, Float: 3, Binary: 4, Utf8: 5, Bool: 6, Decimal: 7, Date: 8, Time: 9, Timestamp: 10, List: 12, FixedSizeBinary: 15, FixedSizeList: 16, Duration: 18, LargeBinary: 19, LargeUtf8: 20 } as const;

export interface ColumnType {
  typeId?: number;
  listSize?: number;
  children?: { type: ColumnType }[] | null;
  toString(): string;
}

const VECTOR_PARAMS = ["distance_type", "num_partitions", "sample_rate", "max_iterations"] as const;
const FTS_PARAMS = ["with_position", "base_tokenizer", "language", "max_token_length", "lower_case", "stem", "remove_stop_words", "ascii_folding"] as const;
export const ALL_PARAMS = [...VECTOR_PARAMS, "num_sub_vectors", "num_bits", "m", "ef_construction", "target_partition_size", ...FTS_PARAMS] as const;
export type ParamName = (typeof ALL_PARAMS)[number];
export type IndexParams = Partial<Record<ParamName, string | number | boolean>>;

const scalarIds: number[] = [T.Int, T.Float, T.Utf8, T.LargeUtf8, T.Bool, T.Date, T.Time, T.Timestamp, T.Decimal, T.Binary, T.LargeBinary, T.FixedSizeBinary, T.Duration];
const isString = (t: ColumnType) => t.typeId === T.Utf8 || t.typeId === T.LargeUtf8;
const child = (t: ColumnType) => t.children?.[0]?.type;
const isFloatVector = (t: ColumnType) => t.typeId === T.FixedSizeList && child(t)?.typeId === T.Float;

interface Kind {
  vector: boolean;
  params: readonly ParamName[];
  /** Which column types the engine accepts, and how to say so. */
  accepts: (t: ColumnType) => boolean;
  needs: string;
}

const vector = (extra: ParamName[]): Kind => ({
  vector: true,
  params: [...VECTOR_PARAMS, ...extra],
  accepts: isFloatVector,
  needs: "a fixed-size list of floats (a vector column)",
});

/** The index types Quiver offers: the contract's seven plus the other ones LanceDB's Node API builds. */
const INDEX_KINDS: Record<string, Kind> = {
  BTREE: { vector: false, params: [], accepts: (t) => scalarIds.includes(t.typeId ?? -99), needs: "a scalar column (number, string, boolean, date/time or binary)" },
  BITMAP: { vector: false, params: [], accepts: (t) => scalarIds.includes(t.typeId ?? -99) && t.typeId !== T.Float && t.typeId !== T.Decimal, needs: "a non-float scalar column" },
  LABEL_LIST: { vector: false, params: [], accepts: (t) => t.typeId === T.List && scalarIds.includes(child(t)?.typeId ?? -99), needs: "a list of scalars" },
  FTS: { vector: false, params: FTS_PARAMS, accepts: (t) => isString(t) || (t.typeId === T.List && !!child(t) && isString(child(t)!)), needs: "a string column or a list of strings" },
  FM: { vector: false, params: [], accepts: isString, needs: "a string column" },
  IVF_FLAT: vector([]),
  IVF_PQ: vector(["num_sub_vectors", "num_bits"]),
  IVF_RQ: vector(["num_bits"]),
  IVF_HNSW_PQ: vector(["num_sub_vectors", "m", "ef_construction"]),
  IVF_HNSW_SQ: vector(["m", "ef_construction"]),
};

/** Other spellings clients use for the same index types. */
const ALIASES: Record<string, string> = { INVERTED: "FTS", LABELLIST: "LABEL_LIST", HNSW_PQ: "IVF_HNSW_PQ", HNSW_SQ: "IVF_HNSW_SQ" };

export function indexKind(raw: string): string {
  const up = raw.trim().toUpperCase();
  const name = ALIASES[up] ?? up;
  if (!INDEX_KINDS[name]) throw invalid(`index_type: unknown index type ${JSON.stringify(raw)}; one of ${Object.keys(INDEX_KINDS).join(", ")}`);
  return name;
}

export const isVectorKind = (kind: string) => INDEX_KINDS[kind]?.vector === true;

// The engine's FTS languages, exactly as it spells them (anything else aborts the process).
const LANGUAGES = ["Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek", "Hungarian", "Italian", "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil", "Turkish"];
const TOKENIZERS = ["simple", "whitespace", "raw", "ngram", "icu", "icu/split"];
const DISTANCES = ["l2", "cosine", "dot"];

/**
 * Check a request's parameters against the index type and column type; returns them normalised
 * (language in the engine's spelling, distance type lower case). Throws 400 naming the field.
 */
export function checkIndexParams(kind: string, column: string, type: ColumnType, params: IndexParams): IndexParams {
  const k = INDEX_KINDS[kind];
  if (!k.accepts(type)) {
    throw invalid(`column: a ${kind} index cannot be built on column ${JSON.stringify(column)} of type ${type.toString()}; it needs ${k.needs}`);
  }
  const out: IndexParams = {};
  for (const [name, value] of Object.entries(params) as [ParamName, string | number | boolean][]) {
    if (value === undefined || value === null) continue;
    if (!k.params.includes(name)) throw invalid(`${name}: not a parameter of ${kind} indexes`);
    out[name] = value;
  }
  if (out.target_partition_size !== undefined) throw invalid("target_partition_size: not supported by this server's engine; use num_partitions");
  if (out.distance_type !== undefined) {
    const d = String(out.distance_type).toLowerCase();
    if (!DISTANCES.includes(d)) throw invalid(`distance_type: must be one of ${DISTANCES.join(", ")}, got ${JSON.stringify(out.distance_type)}`);
    out.distance_type = d;
  }
  const dim = type.listSize ?? 0;
  if (out.num_sub_vectors !== undefined && dim % Number(out.num_sub_vectors) !== 0) {
    throw invalid(`num_sub_vectors: must divide the vector dimension ${dim} of column ${JSON.stringify(column)}, got ${out.num_sub_vectors}`);
  }
  if (kind === "IVF_PQ" && out.num_bits !== undefined && out.num_bits !== 4 && out.num_bits !== 8) {
    throw invalid(`num_bits: must be 4 or 8 for IVF_PQ, got ${out.num_bits}`);
  }
  if (out.m !== undefined && Number(out.m) < 4) throw invalid(`m: must be at least 4, got ${out.m}`);
  if (out.language !== undefined) {
    const lang = LANGUAGES.find((l) => l.toLowerCase() === String(out.language).toLowerCase());
    if (!lang) throw invalid(`language: unknown language ${JSON.stringify(out.language)}; one of ${LANGUAGES.join(", ")}`);
    out.language = lang;
  }
  if (out.base_tokenizer !== undefined) {
    const tok = String(out.base_tokenizer).toLowerCase();
    if (!TOKENIZERS.includes(tok) && !/^(jieba|lindera)\/[\w.-]+$/.test(tok)) {
      throw invalid(`base_tokenizer: unknown tokenizer ${JSON.stringify(out.base_tokenizer)}; one of ${TOKENIZERS.join(", ")}, jieba/<model>, lindera/<model>`);
    }
    out.base_tokenizer = tok;
  }
  return out;
}

/** The engine config for a checked spec. Only ever called with checkIndexParams' output. */
function engineIndex(kind: string, p: IndexParams): lancedb.Index {
  const n = (v: unknown) => (v === undefined ? undefined : Number(v));
  const b = (v: unknown) => (v === undefined ? undefined : Boolean(v));
  const ivf = {
    distanceType: p.distance_type as "l2" | "cosine" | "dot" | undefined,
    numPartitions: n(p.num_partitions),
    sampleRate: n(p.sample_rate),
    maxIterations: n(p.max_iterations),
  };
  const hnsw = { m: n(p.m), efConstruction: n(p.ef_construction) };
  const drop = <O extends object>(o: O) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<O>;
  switch (kind) {
    case "BTREE": return lancedb.Index.btree();
    case "BITMAP": return lancedb.Index.bitmap();
    case "LABEL_LIST": return lancedb.Index.labelList();
    case "FM": return lancedb.Index.fm();
    case "FTS":
      return lancedb.Index.fts(drop({
        withPosition: b(p.with_position),
        baseTokenizer: p.base_tokenizer as lancedb.FtsOptions["baseTokenizer"],
        language: p.language as string | undefined,
        maxTokenLength: n(p.max_token_length),
        lowercase: b(p.lower_case),
        stem: b(p.stem),
        removeStopWords: b(p.remove_stop_words),
        asciiFolding: b(p.ascii_folding),
      }));
    case "IVF_FLAT": return lancedb.Index.ivfFlat(drop(ivf));
    case "IVF_PQ": return lancedb.Index.ivfPq(drop({ ...ivf, numSubVectors: n(p.num_sub_vectors), numBits: n(p.num_bits) }));
    case "IVF_RQ": return lancedb.Index.ivfRq(drop({ ...ivf, numBits: n(p.num_bits) }));
    case "IVF_HNSW_PQ": return lancedb.Index.hnswPq(drop({ ...ivf, ...hnsw, numSubVectors: n(p.num_sub_vectors) }));
    case "IVF_HNSW_SQ": return lancedb.Index.hnswSq(drop({ ...ivf, ...hnsw }));
    default: throw invalid(`index_type: unknown index type ${JSON.stringify(kind)}`);
  }
}

/** One index build, checked and normalised (plain JSON: it is stored in the job record). */
export interface IndexBuildSpec {
  [k: string]: unknown;
  column: string;
  kind: string;
  name: string;
  params: IndexParams;
  /** null for the main branch. */
  branch: string | null;
}

/**
 * Tries of a build whose commit lost to another writer's that rewrote rows it covers (a compaction,
 * automatic maintenance's included, committed while it trained): each try trains on the latest version.
 */
const BUILD_TRIES = 3;

/**
 * Build index `name` on `column`; resolves when it is committed. With `replace`, an index of that
 * name is replaced in the same commit (queries use the old one until then).
 */
export async function buildIndex(table: lancedb.Table, column: string, kind: string, params: IndexParams, name: string, replace = false): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await table.createIndex(column, { config: engineIndex(kind, params), name, replace });
    } catch (err) {
      if (attempt >= BUILD_TRIES || !isCommitConflict(err)) throw err;
      await table.checkoutLatest();
    }
  }
}

/** The upstream friendly type name of an engine index type (listIndices' `indexType`). */
const FRIENDLY: Record<string, string> = {
  BTree: "BTREE", Bitmap: "BITMAP", LabelList: "LABEL_LIST", FTS: "FTS", Inverted: "FTS", Fm: "FM",
  IvfFlat: "IVF_FLAT", IvfPq: "IVF_PQ", IvfRq: "IVF_RQ", IvfHnswPq: "IVF_HNSW_PQ", IvfHnswSq: "IVF_HNSW_SQ",
};
export const friendlyType = (engineType: string) => FRIENDLY[engineType] ?? engineType.toUpperCase();

export const isIndexNotFound = (err: unknown) => /Lance index not found/.test(errorText(err));

export type IndexConfig = lancedb.IndexConfig;

/** The committed indexes of the version `table` holds. */
export const listIndexes = (table: lancedb.Table) => table.listIndices();

/** An index's statistics, or undefined when the table has no index of that name. */
export const indexStats = (table: lancedb.Table, name: string) => table.indexStats(name);

export const dropIndex = (table: lancedb.Table, name: string) => table.dropIndex(name);

/** Loads an index into the engine's cache before the first query needs it. */
export const prewarmIndex = (table: lancedb.Table, name: string) => table.prewarmIndex(name);

/** Remove index `name` if it is committed on the latest version (a canceled build that committed anyway). */
export async function dropIfPresent(table: lancedb.Table, name: string): Promise<void> {
  await table.checkoutLatest();
  if ((await table.listIndices()).some((i) => i.name === name)) await table.dropIndex(name);
}

export const indexNotFound = (name: string, entry: Entry) =>
  new ApiError(Code.TableIndexNotFound, `index ${JSON.stringify(name)} not found in table ${JSON.stringify(entry.objectId)}`);
