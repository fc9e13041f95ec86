import net from "node:net";
import { readdirSync } from "node:fs";
import { Int32, Table, Utf8, vectorFromArray } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { toStream } from "./helpers/arrow.js";
import { ADMIN_KEY, logLine, serverForFile } from "./helpers/quiver.js";

const q = serverForFile({ args: ["--max-json-body", "4096", "--max-arrow-body", "65536"], env: { QUIVER_LOG_LEVEL: "debug" } });

/** Raw HTTP over a socket, for what fetch will not send (lying Content-Length, half bodies). */
function raw(text: string, waitMs = 2000): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(q.port, "127.0.0.1");
    let out = "";
    s.on("data", (d) => (out += d));
    s.on("close", () => resolve(out));
    s.on("error", () => resolve(out));
    s.write(text);
    setTimeout(() => {
      s.destroy();
      resolve(out);
    }, waitMs);
  });
}

describe("routing", () => {
  it("an unknown path is a JSON 404", async () => {
    const r = await q.call("GET", "/v1/nothing/here");
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ type: "/errors/not-found-error", status: 404, instance: "/v1/nothing/here" });
  });

  it("a wrong method is a JSON 405 with Allow", async () => {
    const r = await q.call("GET", "/v1/namespace/x/create");
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("POST");
    expect(r.json.status).toBe(405);
  });

  it("trailing slashes are accepted", async () => {
    expect((await q.call("POST", "/v1/namespace/slash/create/", {})).status).toBe(200);
    expect((await q.call("GET", "/v1/namespace/slash/list/")).status).toBe(200);
  });

  it("the batch routes without an {id} are routed, and their bodies checked", async () => {
    const r = await q.call("POST", "/v1/table/batch-commit", { operations: [] });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ type: "/errors/bad-request", code: 13 });
    expect(r.json.detail).toMatch(/^operations/);
    expect((await q.call("POST", "/v1/table/version/batch-create", {})).json.detail).toMatch(/entries/);
  });

  it("healthz and readyz need no credentials", async () => {
    const h = await fetch(`${q.url}/healthz`);
    expect(h.status).toBe(200);
    expect(await h.json()).toEqual({ status: "ok" });
    expect((await fetch(`${q.url}/readyz`)).status).toBe(200);
  });
});

describe("path ids", () => {
  it("honours a multi-character delimiter", async () => {
    await q.call("POST", "/v1/namespace/d1/create", {});
    const r = await q.call("POST", "/v1/namespace/d1::d2/create?delimiter=::", {});
    expect(r.status).toBe(200);
    expect((await q.call("POST", "/v1/namespace/d1$d2/exists", {})).status).toBe(200);
  });

  it("percent-decodes and treats + as a space (LanceDB's form encoding)", async () => {
    expect((await q.call("POST", "/v1/namespace/with+space/create", {})).status).toBe(200);
    const list = await q.call("GET", "/v1/namespace/%24/list");
    expect(list.json.namespaces).toContain("with space");
    expect((await q.call("POST", "/v1/namespace/with%20space/exists", {})).status).toBe(200);
  });

  it("rejects empty segments with 400", async () => {
    const r = await q.call("POST", "/v1/namespace/a$$b/create", {});
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^id: /);
  });

  it("rejects control characters and '$' inside a name", async () => {
    expect((await q.call("POST", "/v1/namespace/bad%01name/create", {})).status).toBe(400);
    expect((await q.call("POST", "/v1/namespace/a%24b/create?delimiter=.", {})).status).toBe(400);
  });

  it("accepts '/', '..' and spaces in names and keeps storage inside the data directory", async () => {
    // A bare `..` path segment is normalised away by URL parsers, so it is addressed inside a parent.
    for (const id of ["a%2Fb", "odd", "odd$..", "odd$x%2F..%2F..%2Fescape"]) {
      expect((await q.call("POST", `/v1/namespace/${id}/create`, {})).status).toBe(200);
    }
    expect((await q.call("GET", "/v1/namespace/%24/list")).json.namespaces).toContain("a/b");
    expect((await q.call("GET", "/v1/namespace/odd/list")).json.namespaces).toEqual(["..", "x/../../escape"]);
    // Nothing was created beside the data directory.
    expect(readdirSync(q.dataDir).filter((f) => !f.startsWith(".") && f !== "__manifest")).toEqual([]);
  });

  it("a body id different from the path's is 400", async () => {
    const r = await q.call("POST", "/v1/namespace/slash/describe", { id: ["other"] });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^id: /);
  });

  it("a body id equal to the path's is fine", async () => {
    expect((await q.call("POST", "/v1/namespace/slash/describe", { id: ["slash"] })).status).toBe(200);
  });
});

describe("bodies", () => {
  it("malformed JSON is 400", async () => {
    const r = await q.call("POST", "/v1/namespace/m/create", "{not json", { "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^body: malformed JSON/);
  });

  it("a non-object JSON body is 400", async () => {
    expect((await q.call("POST", "/v1/namespace/m/create", "[1]")).status).toBe(400);
  });

  it("an empty body counts as {} and the literal null too", async () => {
    expect((await q.call("POST", "/v1/namespace/empty1/create")).status).toBe(200);
    expect((await q.call("POST", "/v1/namespace/empty2/create", "null")).status).toBe(200);
  });

  it("unknown top-level fields are 400 naming them and what the operation takes; nothing is stored", async () => {
    const r = await q.call("POST", "/v1/namespace/extra/create", { whatever: [1, 2], mode: "create", propertie: {} });
    expect(r.status).toBe(400);
    expect(r.json.detail).toBe('body: unknown fields "whatever", "propertie"; this operation takes identity, context, id, mode, properties');
    expect((await q.call("POST", "/v1/namespace/extra/exists", {})).status).toBe(404);
  });

  it("count_rows with `filter` (the field is `predicate`) is 400, not a count of every row", async () => {
    expect((await q.call("POST", "/v1/table/counted/create", toStream(new Table({ id: vectorFromArray([1, 2, 3], new Int32()) })), { "content-type": "application/vnd.apache.arrow.stream" })).status).toBe(200);
    const r = await q.call("POST", "/v1/table/counted/count_rows", { filter: "id > 1" });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ code: 13, detail: 'body: unknown field "filter"; this operation takes identity, context, id, branch, version, predicate' });
    expect((await q.call("POST", "/v1/table/counted/count_rows", { predicate: "id > 1" })).json).toBe(2);
  });

  it("the fields LanceDB's clients send beside the spec's are taken: an id naming the path, `new_namespace` of a rename", async () => {
    expect((await q.call("POST", "/v1/namespace/cl1/create", { id: ["cl1"] })).status).toBe(200);
    expect((await q.call("POST", "/v1/namespace/cl2/create", {})).status).toBe(200);
    expect((await q.call("POST", "/v1/table/cl1$t/create", toStream(new Table({ id: vectorFromArray([1], new Int32()) })), { "content-type": "application/vnd.apache.arrow.stream" })).status).toBe(200);
    expect((await q.call("POST", "/v1/table/cl1$t/rename", { id: ["cl1", "t"], new_table_name: "t", new_namespace: ["cl2"] })).status).toBe(200);
    expect((await q.call("POST", "/v1/table/cl2$t/exists", {})).status).toBe(200);
  });

  it("a wrong type is 400 naming the field path", async () => {
    const r = await q.call("POST", "/v1/namespace/typed/create", { properties: { a: 1 } });
    expect(r.status).toBe(400);
    expect(r.json.detail).toMatch(/^properties\.a: must be string/);
    expect((await q.call("POST", "/v1/namespace/typed/exists", {})).status).toBe(404);
  });

  it("a JSON body over the limit is 413 naming the limit, and nothing is stored", async () => {
    const big = { properties: { blob: "x".repeat(10_000) } };
    const r = await q.call("POST", "/v1/namespace/huge/create", big);
    expect(r.status).toBe(413);
    expect(r.json.detail).toContain("4096");
    expect((await q.call("POST", "/v1/namespace/huge/exists", {})).status).toBe(404);
  });

  it("an Arrow body over --max-arrow-body is 413 naming the limit, and nothing is stored", async () => {
    const arrowRows = (n: number) => {
      const ids = Array.from({ length: n }, (_, i) => i);
      return toStream(new Table({ id: vectorFromArray(ids, new Int32()), name: vectorFromArray(ids.map((i) => `row-${i}`), new Utf8()) }));
    };
    const big = arrowRows(10_000);
    expect(big.byteLength).toBeGreaterThan(65536);
    const c = await q.call("POST", "/v1/table/bigarrow/create", big);
    expect(c.status).toBe(413);
    expect(c.json.detail).toContain("65536");
    expect((await q.call("POST", "/v1/table/bigarrow/exists", {})).status).toBe(404);
    // Under the limit it is stored; an insert over it adds nothing.
    expect((await q.call("POST", "/v1/table/bigarrow/create", arrowRows(10))).status).toBe(200);
    const i = await q.call("POST", "/v1/table/bigarrow/insert", big);
    expect(i.status).toBe(413);
    expect(i.json.detail).toContain("65536");
    expect((await q.call("POST", "/v1/table/bigarrow/count_rows", {})).json).toBe(10);
    // Without a Content-Length (chunked), the limit applies to the bytes read so far. Sent piece
    // by piece over a raw socket: the server answers and closes before the client finishes.
    const out = await new Promise<string>((resolve) => {
      const sock = net.connect(q.port, "127.0.0.1");
      let got = "";
      sock.on("data", (d) => (got += d));
      sock.on("close", () => resolve(got));
      sock.on("error", () => resolve(got));
      sock.write(`POST /v1/table/bigarrow/insert HTTP/1.1\r\nHost: x\r\nx-api-key: ${ADMIN_KEY}\r\ntransfer-encoding: chunked\r\n\r\n`);
      let o = 0;
      const timer = setInterval(() => {
        if (sock.destroyed || o >= big.byteLength) {
          clearInterval(timer);
          if (!sock.destroyed) sock.end("0\r\n\r\n");
          return;
        }
        const piece = big.subarray(o, o + 16384);
        o += piece.byteLength;
        sock.write(`${piece.byteLength.toString(16)}\r\n`);
        sock.write(piece);
        sock.write("\r\n");
      }, 10);
    });
    expect(out).toMatch(/^HTTP\/1.1 413/);
    expect(out).toContain("65536");
    expect((await q.call("POST", "/v1/table/bigarrow/describe", {})).json.version).toBe(1);
  });

  it("413 comes from Content-Length alone, without reading the rest", async () => {
    const out = await raw(
      `POST /v1/namespace/huge2/create HTTP/1.1\r\nHost: x\r\nx-api-key: ${ADMIN_KEY}\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n{"a":`,
    );
    expect(out).toMatch(/^HTTP\/1.1 413/);
    expect(out).toContain("4096");
  });

  it("a client that goes away mid-body does not hurt the server", async () => {
    await raw(
      `POST /v1/namespace/half/create HTTP/1.1\r\nHost: x\r\nx-api-key: ${ADMIN_KEY}\r\ncontent-length: 1000\r\n\r\n{"prop`,
      200,
    );
    expect((await fetch(`${q.url}/healthz`)).status).toBe(200);
    expect((await q.call("POST", "/v1/namespace/half/exists", {})).status).toBe(404);
  });
});

describe("context", () => {
  it("x-svc-ctx-* and x-lance-ctx-* headers merge over body context and reach the logs", async () => {
    await q.call("POST", "/v1/namespace/ctx/create", { context: { trace: "body", keep: "b" } }, { "x-svc-ctx-trace": "hdr-123", "x-lance-ctx-span": "s-9" });
    const line = await logLine(q, (l) => l.includes('"path":"/v1/namespace/ctx/create"'));
    expect(JSON.parse(line).context).toEqual({ trace: "hdr-123", keep: "b", span: "s-9" });
  });

  it("context keys with underscores, dots and digits reach the operation's context", async () => {
    const r = await q.call("POST", "/v1/namespace/ctx2/create", {}, {
      "x-svc-ctx-trace_id": "t_1",
      "x-svc-ctx-tenant.region": "eu.1",
      "x-svc-ctx-shard42": "42",
      "x-lance-ctx-request_id": "req_9",
      x_forwarded_for: "10.0.0.1",
    });
    expect(r.status).toBe(200);
    const line = await logLine(q, (l) => l.includes('"path":"/v1/namespace/ctx2/create"'));
    expect(JSON.parse(line).context).toEqual({ trace_id: "t_1", "tenant.region": "eu.1", shard42: "42", request_id: "req_9" });
  });
});

describe("protocol", () => {
  it("an HTTP/1.0 request gets a 505 answer, not a reset", async () => {
    const out = await raw(`GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n`);
    expect(out).toMatch(/^HTTP\/1\.1 505 /);
    expect(out).toContain("does not support HTTP/1.0");
    expect((await fetch(`${q.url}/healthz`)).status).toBe(200);
  });
});
