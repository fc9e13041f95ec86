// The engine's result buffers (and its read-ahead of a result) live outside the JavaScript heap
// and are freed only when their JavaScript iterator is collected. A client that leaves mid-result
// leaves little garbage on the heap, so V8 would not collect for a long time while the engine
// holds the rest of the result (measured: ~37 MB per abandoned 35 MB scan, kept until a GC).
// After such an abandonment a full collection is asked for, at most once per interval.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

// The flag is on only while the function is fetched: left on, it applies to every isolate made
// later (the worker threads), where it changed how a UDF near its heap limit fails.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
setFlagsFromString("--no-expose-gc");

const INTERVAL_MS = 1000;
let scheduled = false;

/** Ask for a full collection soon (coalesced), so abandoned engine buffers go back to the system. */
export function releaseAbandoned(): void {
  if (scheduled) return;
  scheduled = true;
  setTimeout(() => {
    scheduled = false;
    gc();
  }, INTERVAL_MS).unref();
}
