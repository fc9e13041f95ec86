// Raw HTTP/1.1 clients over a socket, for clients no fetch() can imitate: ones that upload a body
// byte by byte, or that send a request and never read the answer.
import net from "node:net";

export interface RawClient {
  socket: net.Socket;
  /** Everything received so far. */
  received(): string;
  /** Resolves when the server closed the connection. */
  closed: Promise<void>;
}

const head = (method: string, path: string, headers: Record<string, string>) =>
  `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n` + Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n";

function open(port: number, read: boolean): RawClient {
  const socket = net.connect(port, "127.0.0.1");
  let got = "";
  socket.on("error", () => undefined);
  if (read) socket.on("data", (d) => (got += d.toString("latin1")));
  else socket.pause();
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  return { socket, received: () => got, closed };
}

/** Send the headers and the body's first byte, then one more byte every `everyMs` until closed. */
export function slowUpload(port: number, path: string, body: string, headers: Record<string, string>, everyMs: number): RawClient {
  const c = open(port, true);
  c.socket.write(head("POST", path, { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }));
  let i = 0;
  const timer = setInterval(() => {
    if (i >= body.length || c.socket.destroyed) return clearInterval(timer);
    c.socket.write(body[i++]);
  }, everyMs);
  void c.closed.then(() => clearInterval(timer));
  return c;
}

/** Send a whole JSON request, then never read the answer (the socket stays paused). */
export function nonReading(port: number, path: string, body: string, headers: Record<string, string>): RawClient {
  const c = open(port, false);
  c.socket.write(head("POST", path, { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }) + body);
  return c;
}

/** The status code of the first response in raw bytes, or null before one arrived. */
export const statusOf = (raw: string): number | null => {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  return m ? Number(m[1]) : null;
};

/** The body of the first (Content-Length) response in raw bytes. */
export const bodyOf = (raw: string): string => raw.slice(raw.indexOf("\r\n\r\n") + 4);
