// The request pipeline in process, without a socket: what dispatch() answers for routing,
// credentials, public routes, bodies and readiness.
import { describe, expect, it } from "vitest";
import type { Incoming, Outgoing } from "../../src/http/pipeline.js";
import { inProcessForFile } from "../helpers/in-process.js";
import { ADMIN_KEY as KEY, READ_KEY as READ } from "../helpers/quiver.js";

// The built services, as a server process runs them: its job launcher and worker threads start
// from files next to them.
const q = inProcessForFile();

const signal = () => new AbortController().signal;
const send = (method: string, p: string, body?: unknown, headers: Record<string, string> = { "x-api-key": KEY }): Promise<Outgoing> => {
  const [pathOnly, query = ""] = p.split("?");
  const inc: Incoming = { method, path: pathOnly, query, headers, signal, gone: () => false };
  return q.pipeline.dispatch(inc, body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
};
const json = (o: Outgoing) => (o.kind === "body" ? JSON.parse(String(o.body)) : undefined);

describe("pipeline", () => {
  it("routes, with trailing slashes, and answers JSON with a request id", async () => {
    const o = await send("POST", "/v1/namespace/a/create/", {});
    expect(o.status).toBe(200);
    expect(o.headers["x-request-id"]).toMatch(/^[0-9a-f]{6}-/);
    expect(json(await send("GET", "/v1/namespace/%24/list"))).toMatchObject({ namespaces: ["a"] });
  });

  it("unknown paths are 404 and wrong methods 405 with Allow, each an endpoint the server does not have (code 0), not invalid input", async () => {
    expect(json(await send("GET", "/v1/nope"))).toMatchObject({ status: 404, instance: "/v1/nope", code: 0, detail: "no such endpoint: GET /v1/nope" });
    const o = await send("GET", "/v1/namespace/a/create");
    expect(o.status).toBe(405);
    expect(o.headers.allow).toBe("POST");
    expect(json(o)).toMatchObject({ status: 405, code: 0 });
  });

  it("credentials: none is 401, the body's identity counts, public routes need none", async () => {
    expect((await send("POST", "/v1/namespace/a/describe", {}, {})).status).toBe(401);
    expect((await send("POST", "/v1/namespace/a/describe", { identity: { api_key: KEY } }, {})).status).toBe(200);
    expect(json(await send("GET", "/healthz", undefined, {}))).toEqual({ status: "ok" });
  });

  it("a body id that differs from the path is 400; malformed JSON is 400", async () => {
    expect(json(await send("POST", "/v1/namespace/a/describe", { id: ["b"] }))).toMatchObject({ status: 400, detail: expect.stringMatching(/^id: body id/) });
    const bad = await q.pipeline.dispatch({ method: "POST", path: "/v1/namespace/a/describe", query: "", headers: { "x-api-key": KEY }, signal }, Buffer.from("{"));
    expect(json(bad).detail).toMatch(/^body: malformed JSON/);
  });

  it("context headers merge over the body's context", async () => {
    const o = await send("POST", "/v1/namespace/a/describe", { context: { a: "body", b: "body" } }, { "x-api-key": KEY, "x-svc-ctx-a": "hdr", "x-lance-ctx-c": "up" });
    expect(o.context).toEqual({ a: "hdr", b: "body", c: "up" });
  });

  it("readiness is 503 with its reason while every execution slot is taken, and while a directory is not writable", async () => {
    const l = q.services.lifecycle;
    l.full = true;
    try {
      expect(json(await send("GET", "/readyz", undefined, {}))).toEqual({ status: "busy", reason: `every one of --max-in-flight ${q.services.config.maxInFlight} execution slots is taken` });
    } finally {
      l.full = false;
    }
    l.unready = "cannot write to /data: it is on a read-only file system (EROFS)";
    try {
      const o = await send("GET", "/readyz", undefined, {});
      expect([o.status, json(o)]).toEqual([503, { status: "not_ready", reason: "cannot write to /data: it is on a read-only file system (EROFS)" }]);
    } finally {
      l.unready = null;
    }
    expect(json(await send("GET", "/readyz", undefined, {}))).toEqual({ status: "ready" });
  });

  it("a catalog commit LanceDB gave up on after its retries (Too many concurrent writers) is 503 with Retry-After, not 500", async () => {
    const catalog = q.services.catalog;
    const insert = catalog.insert;
    catalog.insert = () => Promise.reject(new Error("lance error: Retryable commit conflict for version 12: Too many concurrent writers. Attempted 20 retries, retry_timeout of 30.000 seconds"));
    try {
      const o = await send("POST", "/v1/namespace/contended/create", {});
      expect(o.status).toBe(503);
      expect(o.headers["retry-after"]).toBe("1");
      expect(json(o).detail).toMatch(/^too many concurrent writers/);
    } finally {
      catalog.insert = insert;
    }
    expect((await send("POST", "/v1/namespace/contended/create", {})).status).toBe(200);
  });

  it("readiness is 503 while draining", async () => {
    q.services.lifecycle.draining = true;
    try {
      const o = await send("GET", "/readyz", undefined, {});
      expect([o.status, json(o)]).toEqual([503, { status: "draining" }]);
    } finally {
      q.services.lifecycle.draining = false;
    }
  });

  describe("steps before the body (admit)", () => {
    const incoming = (method: string, p: string, headers: Record<string, string>, query = "") => ({ method, path: p, query, headers, signal });
    const admit = async (method: string, p: string, headers: Record<string, string>, query = "") => {
      const routed = q.pipeline.route(method, p);
      if (routed.kind !== "route") throw new Error("not routed");
      return q.pipeline.admit(routed.route, incoming(method, p, headers, query));
    };

    it("credentials: a bad header key is 401 and a role short of the route 403, answered before any body", async () => {
      const bad = await admit("POST", "/v1/table/t/insert", { "x-api-key": "nope" });
      expect(bad.kind === "answer" && bad.out.status).toBe(401);
      const short = await admit("POST", "/v1/table/t/insert", { "x-api-key": READ });
      expect(short.kind === "answer" && short.out.status).toBe(403);
    });

    it("credentials: no header on an Arrow route is 401 at once; on a JSON route the body's identity is awaited", async () => {
      const arrow = await admit("POST", "/v1/table/t/insert", {});
      expect(arrow.kind === "answer" && arrow.out.status).toBe(401);
      const json = await admit("POST", "/v1/namespace/a/describe", {});
      expect(json.kind === "admitted" && json.admitted.caller).toEqual({ kind: "body-identity" });
    });

    it("params: query parameters are coerced from the operation's schema; a bad one is 400 naming it", async () => {
      const ok = await admit("POST", "/v1/table/t/version/list", { "x-api-key": KEY }, "limit=5&descending=true");
      expect(ok.kind === "admitted" && ok.admitted.args).toEqual({ limit: 5, descending: true });
      const bad = await admit("GET", "/v1/namespace/%24/list", { "x-api-key": KEY }, "limit=0");
      expect(bad.kind === "answer" && JSON.parse(String((bad.out as { body: string }).body)).detail).toBe("limit: must be >= 1");
    });
  });
});
