// JSON lines on stderr: one object per event, so operators can grep and ship them as they are.

type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
let threshold = order.info;

export function setLogLevel(level: string): void {
  threshold = order[level as Level] ?? order.info;
}

export const logEnabled = (level: Level) => order[level] >= threshold;

function emit(level: Level, msg: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold) return;
  process.stderr.write(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields }) + "\n");
}

export const log = {
  /** Whether `level` is written: lets hot paths skip building fields nobody reads. */
  enabled: (level: Level) => order[level] >= threshold,
  debug: (msg: string, fields?: Record<string, unknown>) => emit("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit("error", msg, fields),
};
