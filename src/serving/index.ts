// The serving index's face: all the rest of the server uses of src/serving/ (test/unit/layers.test.ts
// keeps every other module of this folder private to it). `createServingIndexes` gives search and
// explain (operations), the sync after each commit and the drop of a removed table (services.ts
// subscribes them), the build or load a start warms, the saved tables, and the figures /metrics
// reads (registered by the indexes themselves).
//
// Where an index's state lives, all on the main thread unless named:
//   indexes.ts      every table's state (its status, writer queue, pending sync, answer plans) and the
//                   memory budget shared between tenants (shares.ts); where every write path enters:
//                   `committed` (a write of this process, awaited before it is answered), a
//                   search that finds the table at a newer version (another process's or replica's
//                   commit), `forget` (a table removed), `warm` (a start)
//   table-index.ts  one index: its build from the table's rows, its sync between two versions
//   graph.ts, rows.ts, row-slots.ts   the index's memory (HNSW graph, cached columns, row ids →
//                   slots), shared with the pool's threads (thread.ts), which add rows and search
//                   (distances: kernel.ts, WebAssembly SIMD over that memory)
//   filters.ts, predicate.ts          filter bitmaps and value indexes over the cached columns
//   store.ts        the copy saved in the state directory across restarts
//   pool.ts         the Piscina pool running thread.ts
// Reads of LanceDB, the store of record, are the engine's (src/engine/serving-source.ts).
export { createServingIndexes, type At, type Served, type ServingIndexes } from "./indexes.js";
export { dataOf } from "./table-index.js";
