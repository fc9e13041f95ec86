// The route matcher, in process: literal segments beat parameters, methods are told apart, and
// every route of the table is reachable by its own path.
import { describe, expect, it } from "vitest";
import { compileRoutes } from "../../src/http/router.js";
import { routes } from "../../src/routes.js";

describe("router", () => {
  const match = compileRoutes([
    { method: "POST", path: "/v1/table/{id}/create", value: "create" },
    { method: "POST", path: "/v1/table/version/batch-create", value: "batch" },
    { method: "GET", path: "/v1/table/{id}/list", value: "list" },
    { method: "POST", path: "/v1/table/{id}/index/{index_name}/stats", value: "stats" },
  ]);

  it("a literal segment wins over a parameter", () => {
    expect(match("POST", "/v1/table/version/batch-create")).toMatchObject({ kind: "found", value: "batch" });
    expect(match("POST", "/v1/table/t1/create")).toEqual({ kind: "found", value: "create", params: { id: "t1" } });
  });

  it("binds every parameter from its raw segment", () => {
    expect(match("POST", "/v1/table/a%24b/index/my%20idx/stats")).toEqual({ kind: "found", value: "stats", params: { id: "a%24b", index_name: "my%20idx" } });
  });

  it("a known path with another method is wrong-method with the allowed list; others not found", () => {
    expect(match("POST", "/v1/table/t/list")).toEqual({ kind: "wrong-method", allowed: ["GET"] });
    expect(match("GET", "/v1/table/t/nothing")).toEqual({ kind: "not-found" });
    expect(match("GET", "/v1/table/t/index/x/stats/more")).toEqual({ kind: "not-found" });
  });

  it("every route of the table matches its own path and method", () => {
    const all = compileRoutes(routes);
    for (const r of routes) {
      const path = r.path.replace(/\{[^}]+\}/g, "x");
      const m = all(r.method, path);
      expect(m.kind, `${r.method} ${r.path}`).toBe("found");
      if (m.kind === "found") expect(m.value.name).toBe(r.value.name);
    }
  });
});
