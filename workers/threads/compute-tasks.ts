// The compute sandbox pool's tasks, by name (Piscina calls the export a task names; see
// workers/processes/compute.ts). Only the sandbox process loads this module.
export { table } from "./table-functions.js";
export { udf } from "./udf.js";
