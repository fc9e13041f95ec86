// Long loops on the event loop (a serving index's sync, a value index's build) give the event loop
// a turn whenever they have held it for a millisecond: cut by row counts, a slice held it 3–5 ms
// on the 2-core machine, and every search in flight waited that long again at each slice.

/** Most time a loop holds the event loop between two turns. */
const SLICE_MS = 1;

/** `pause()`, called often inside a loop: a turn of the event loop once SLICE_MS passed since the last. */
export function slicer(): { pause(): Promise<void> | undefined } {
  let since = performance.now();
  return {
    pause() {
      if (performance.now() - since < SLICE_MS) return undefined;
      return new Promise<void>((resolve) =>
        setImmediate(() => {
          since = performance.now();
          resolve();
        }),
      );
    },
  };
}
