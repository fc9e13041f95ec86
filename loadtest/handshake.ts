// How the parent of --generators and its children agree on when the measured part starts: each
// child says when it has read its sources and again when its warmup is over, and waits for the
// parent's word each time. The parent takes its first /metrics sample between the children's
// warmups and their loops, so the server's count covers exactly the requests the children report
// (a start at a fixed time raced a child still starting, or a first sample still in flight).
/** Where a run waits for others: once its sources are read, once its warmup is over. */
export interface Gate {
  ready(): Promise<void>;
  warmed(): Promise<void>;
}

/** A child's line on stderr saying it waits, and the parent's line on its stdin saying go. */
export const WAITING = "quiver-loadtest-generator: waiting";
export const GO = "go";

/** The child's side: says it waits on stderr, then waits for the word on stdin; `close()` when its run is over. */
export function childGate(): Gate & { close(): void } {
  const wait = () =>
    new Promise<void>((resolve, reject) => {
      const gone = () => reject(new Error("the parent of this generator went away before the start"));
      process.stdin.once("end", gone);
      process.stdin.once("data", () => {
        process.stdin.off("end", gone);
        resolve();
      });
      process.stderr.write(`${WAITING}\n`);
    });
  // An open stdin would keep the child from exiting after its run.
  return { ready: wait, warmed: wait, close: () => process.stdin.destroy() };
}
