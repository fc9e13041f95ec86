// The most each size a client names may be (docs/limits.md, "Sizes a request names"). LanceDB
// sizes allocations from these numbers before it looks at the data: `k` = 2^32 − 1 on an IVF_PQ
// index asked it for 32 GiB at once (a heap of k entries), and the process aborted. Every integer
// of a request schema has a maximum (test/unit/schemas.test.ts walks them all); the ones below are
// those whose value something allocates or loops over, the rest are bounded by the wire type.

/** A JSON number past this is no longer exact; counters, versions and sizes stop here. */
export const MAX_EXACT = Number.MAX_SAFE_INTEGER;
/** The lance-namespace spec's int32 fields (page `limit`s are then served as at most 1,000). */
export const MAX_INT32 = 2 ** 31 - 1;

/** Search sizes: each query vector, and a full-text search, keeps a heap of its k + offset best. */
export const SEARCH = {
  /** k + offset of a vector, full-text or hybrid search (a scan's k is a plain limit: no bound). */
  rows: 10_000,
  /**
   * Query vectors of one query (a multi_vector list). LanceDB adds them one by one on the event
   * loop, each copying the list so far: 512 keep a whole query's main-thread CPU near 30 ms
   * (1,024 took 50-60 ms, 4,096 over 370 ms for the adding alone; docs/limits.md).
   */
  queryVectors: 512,
  /** Candidates one search keeps over all its query vectors: max((k + offset) × refine_factor, ef) × vectors. */
  candidates: 1_000_000,
  /** Candidates HNSW keeps per query vector (its heaps and the answer are sized by it). */
  ef: 100_000,
  /** k × refine_factor rows are read again to re-rank. */
  refineFactor: 1_000,
  /** IVF partitions probed; an index has at most `partitions` of them. */
  nprobes: 65_536,
  /** Full-text: terms a fuzzy term expands to, its edit distance, and a phrase's slop. A
   *  Levenshtein automaton grows steeply with the distance; Elasticsearch stops at 2 too. */
  maxExpansions: 10_000,
  fuzziness: 2,
  slop: 10_000,
  prefixLength: 1_000,
} as const;

/** Index-build parameters: LanceDB allocates centroids, codebooks and graphs from them. */
export const INDEX = {
  partitions: 65_536,
  subVectors: 16_384,
  bits: 16,
  sampleRate: 65_536,
  iterations: 10_000,
  targetPartitionSize: 100_000_000,
  hnswM: 256,
  efConstruction: 10_000,
  tokenLength: 65_536,
  ngramLength: 255,
  blockSize: 65_536,
} as const;

/** Background jobs' sizes (backfills, view refreshes): rows per batch, tasks and workers. */
export const JOB = {
  concurrency: 1_024,
  rows: 100_000_000,
  seconds: 86_400,
  cpus: 1_024,
  memoryBytes: 2 ** 50,
} as const;
