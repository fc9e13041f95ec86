import { STATUS_CODES } from "node:http";

const lines = new Map<number, string>();

/** uWS wants the whole status line ("200 OK"); build each one once. */
export function statusLine(status: number): string {
  let line = lines.get(status);
  if (!line) {
    line = `${status} ${STATUS_CODES[status] ?? "Unknown"}`;
    lines.set(status, line);
  }
  return line;
}
