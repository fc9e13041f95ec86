// The engine's result buffers (and its read-ahead of a result) live outside the JavaScript heap
// and are freed only when their JavaScript iterator is collected. A client that leaves mid-result
// leaves little garbage on the heap, so V8 would not collect for a long time while the engine
// holds the rest of the result (measured: ~37 MB per abandoned 35 MB scan, kept until a GC).
// After such an abandonment V8 is nudged into a collection, at most once per interval: it collects
// when the memory it is told about outside its heap jumps, and a large ArrayBuffer that is never
// written is such news at no cost in resident memory (measured: 20 abandoned scans, 815 MB → 161 MB
// within a second after a 64 MiB one, allocated in ~6 ms; twice that is used for margin).
// `--expose-gc` would do it directly, but a V8 flag reaches the worker threads too, where it made
// UDFs near their heap limit fail by timeout instead.
const NUDGE_BYTES = 128 << 20;
const INTERVAL_MS = 1000;
let scheduled = false;
let nudge: ArrayBuffer | null = null;

/** Have V8 collect soon (coalesced), so abandoned engine buffers go back to the system. */
export function releaseAbandoned(): void {
  if (scheduled) return;
  scheduled = true;
  setTimeout(() => {
    scheduled = false;
    nudge = new ArrayBuffer(NUDGE_BYTES);
    nudge = null;
  }, INTERVAL_MS).unref();
}
