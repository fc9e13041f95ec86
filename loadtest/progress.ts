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

/** `total` is a plan (a loop ends after its last answers): past it the line says so instead of counting past it. */
export function progressText(o: { label: string; elapsed: number; total: number; rate: number; p50: number; p99: number; errors: number }): string {
  const e = Math.round(o.elapsed);
  const t = Math.round(o.total);
  const time = e <= t ? `${e}/${t} s` : `${e} s, past the ${t} s planned`;
  return `${o.label} ${time}  ${o.rate.toFixed(0)} req/s  p50 ${f(o.p50)} ms  p99 ${f(o.p99)} ms  errors ${o.errors}  ${e <= t ? `${t - e} s left` : "finishing"}`;
}
