// A minimal keep-alive HTTP/1.1 client over one socket, one request at a time: a load generator
// must cost the server's machine as little CPU as possible (fetch/undici costs several times more).
// Handles Content-Length and chunked responses; that is all Quiver sends.
import net from "node:net";

export interface Reply {
  status: number;
  /** The status line and headers, as sent. */
  head: string;
  body: Buffer;
}

export class Conn {
  private sock: net.Socket;
  private buf = Buffer.alloc(0);
  private pending: { resolve: (r: Reply) => void; reject: (e: Error) => void } | null = null;
  /** The socket closed (the server closes idle connections): a request on it fails at once. */
  closed = false;

  constructor(host: string, port: number) {
    this.sock = net.connect({ host, port, noDelay: true });
    this.sock.on("data", (d) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.tryParse();
    });
    this.sock.on("error", (e) => this.pending?.reject(e));
    this.sock.on("close", () => {
      this.closed = true;
      this.pending?.reject(new Error("connection closed"));
    });
  }

  request(method: string, path: string, headers: string, body: Buffer | null): Promise<Reply> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error("connection closed"));
      this.pending = { resolve, reject };
      const head = `${method} ${path} HTTP/1.1\r\nhost: x\r\n${headers}content-length: ${body ? body.length : 0}\r\n\r\n`;
      this.sock.write(body ? Buffer.concat([Buffer.from(head), body]) : head);
    });
  }

  close(): void {
    this.sock.destroy();
  }

  private tryParse(): void {
    const end = this.buf.indexOf("\r\n\r\n");
    if (end < 0 || !this.pending) return;
    const head = this.buf.toString("latin1", 0, end);
    const status = Number(head.slice(9, 12));
    const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
    let body: Buffer;
    let used: number;
    if (cl) {
      const n = Number(cl[1]);
      if (this.buf.length < end + 4 + n) return;
      body = this.buf.subarray(end + 4, end + 4 + n);
      used = end + 4 + n;
    } else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const parts: Buffer[] = [];
      let p = end + 4;
      for (;;) {
        const nl = this.buf.indexOf("\r\n", p);
        if (nl < 0) return;
        const size = parseInt(this.buf.toString("latin1", p, nl), 16);
        if (this.buf.length < nl + 2 + size + 2) return;
        if (size === 0) {
          used = nl + 4;
          break;
        }
        parts.push(this.buf.subarray(nl + 2, nl + 2 + size));
        p = nl + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      body = Buffer.alloc(0);
      used = end + 4;
    }
    this.buf = this.buf.subarray(used);
    const done = this.pending;
    this.pending = null;
    done.resolve({ status, head, body });
  }
}

/** POST a JSON (or raw) body; the JSON answer, or a throw naming the path and status. */
export async function post(conn: Conn, headers: string, path: string, body: object | Buffer): Promise<any> {
  const r = await conn.request("POST", path, headers, Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body)));
  if (r.status >= 300) throw new Error(`${path}: ${r.status} ${r.body}`);
  return r.body.length ? JSON.parse(r.body.toString()) : null;
}

/** Wait for a job (transaction) to succeed; answers its description and the seconds since `t0`. */
export async function untilSucceeded(conn: Conn, headers: string, jobId: string, t0: number): Promise<{ properties: Record<string, string>; seconds: number }> {
  for (;;) {
    const d = await post(conn, headers, `/v1/transaction/${jobId}/describe`, {});
    if (d.status === "Succeeded") return { properties: d.properties, seconds: (performance.now() - t0) / 1000 };
    if (d.status !== "Queued" && d.status !== "Running") throw new Error(`job ${jobId}: ${d.status} ${d.properties.error_message}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
