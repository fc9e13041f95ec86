// The progress line on stderr, once a second: rewritten in place on a terminal, one line a second
// otherwise (so a log shows the run's course too).
export interface Progress {
  show(text: string): void;
  end(): void;
}

export function progress(quiet: boolean, out: NodeJS.WriteStream = process.stderr): Progress {
  if (quiet) return { show() {}, end() {} };
  let shown = false;
  return {
    show(text) {
      if (out.isTTY) out.write(`\r${text}\x1b[K`);
      else out.write(`${text}\n`);
      shown = true;
    },
    end() {
      if (shown && out.isTTY) out.write("\n");
    },
  };
}

const f = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

export function progressText(o: { label: string; elapsed: number; total: number; rate: number; p50: number; p99: number; errors: number }): string {
  const left = Math.max(0, o.total - o.elapsed);
  return `${o.label} ${o.elapsed.toFixed(0)}/${o.total.toFixed(0)} s  ${o.rate.toFixed(0)} req/s  p50 ${f(o.p50)} ms  p99 ${f(o.p99)} ms  errors ${o.errors}  ${left.toFixed(0)} s left`;
}
