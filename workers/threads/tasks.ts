// The pool's tasks, by name (Piscina calls the export a task names; see workers/pool.ts).
export { ingest } from "./ingest.js";
export { table } from "./table-functions.js";
export { udf } from "./udf.js";
