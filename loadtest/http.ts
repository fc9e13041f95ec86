// The harness's HTTP client: node:http(s) over a keep-alive Agent of exactly `connections` sockets.
// The drivers never have more requests outstanding than that, so the Agent never queues one: every
// wait a request sees is either the server's or the drivers' own (and the open loop counts the
// latter from the intended send time).
import http from "node:http";
import https from "node:https";

export interface Request {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface Answer {
  /** HTTP status, or 0 when no answer came (the error says why). */
  status: number;
  body: Buffer;
  /** The answer's headers (lower-case names); empty when no answer came. */
  headers: http.IncomingHttpHeaders;
  error?: string;
}

export interface Client {
  send(req: Request): Promise<Answer>;
  close(): void;
}

/** `timeoutMs`: a request not answered by then ends as error "timeout" (its connection is closed). */
export function client(baseUrl: string, connections: number, timeoutMs = 30_000): Client {
  const url = new URL(baseUrl);
  const tls = url.protocol === "https:";
  const opts = { keepAlive: true, maxSockets: connections, maxFreeSockets: connections, scheduling: "fifo" as const };
  const agent = tls ? new https.Agent(opts) : new http.Agent(opts);
  const request = tls ? https.request : http.request;
  return {
    send(req) {
      return new Promise((resolve) => {
        const headers = { ...req.headers, "content-length": String(req.body?.length ?? 0) };
        const r = request(
          { agent, host: url.hostname, port: url.port || (tls ? 443 : 80), method: req.method, path: req.path, headers },
          (res) => {
            const parts: Buffer[] = [];
            res.on("data", (d: Buffer) => parts.push(d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: parts.length === 1 ? parts[0] : Buffer.concat(parts), headers: res.headers }));
            res.on("error", (e) => resolve({ status: 0, body: Buffer.alloc(0), headers: {}, error: errorName(e) }));
          },
        );
        r.on("error", (e) => resolve({ status: 0, body: Buffer.alloc(0), headers: {}, error: errorName(e) }));
        r.setTimeout(timeoutMs, () => r.destroy(Object.assign(new Error("timeout"), { code: "timeout" })));
        r.end(req.body);
      });
    },
    close: () => agent.destroy(),
  };
}

/** A short, countable name for a transport error (ECONNRESET, ECONNREFUSED, …). */
const errorName = (e: Error & { code?: string }) => e.code ?? e.message;

/** The headers every request carries: the credential, the answer format, the user's own. */
export function baseHeaders(apiKey: string | undefined, extra: Record<string, string>): Record<string, string> {
  return { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...extra };
}

/** Sends a request; the answer's body, or a throw naming the path and status. */
async function call(c: Client, headers: Record<string, string>, method: string, path: string, body: unknown, accept: string): Promise<Buffer> {
  const a = await c.send({
    method,
    path,
    headers: { ...headers, accept, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
  });
  if (a.status < 200 || a.status >= 300) throw new Error(`${method} ${path}: ${a.status || a.error} ${a.body.toString().slice(0, 300)}`);
  return a.body;
}

/** A JSON request and its JSON answer. */
export async function callJson(c: Client, headers: Record<string, string>, method: string, path: string, body?: unknown): Promise<any> {
  const b = await call(c, headers, method, path, body, "application/json");
  return b.length ? JSON.parse(b.toString()) : null;
}

/** A GET answering text (the Prometheus metrics). */
export const callText = async (c: Client, headers: Record<string, string>, path: string): Promise<string> =>
  (await call(c, headers, "GET", path, undefined, "text/plain")).toString();
