// The V8 flags Quiver runs with: `npm start` and the test and bench harnesses pass them to node.
// They exist only on node's command line (V8 reads them as the process starts; set later with
// v8.setFlagsFromString, this one aborts the process).
//
// --single-threaded-gc: the garbage collector works on the main thread only, not also on helper
// threads. A query server's main thread is mostly idle, and the helpers took CPU from the
// engine's threads on the same cores (docs/design.md, Query batching, has the measurements).
export const V8_FLAGS = ["--single-threaded-gc"];

/** Whether this process was started with them (the start log says so). */
export const hasV8Flags = (): boolean => V8_FLAGS.every((f) => process.execArgv.includes(f));
