// GET /v1/openapi.json: an OpenAPI 3.1 document generated from the route table, valid by a
// standard validator, naming every route with its role, body schema, parameters and error body.
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { routes } from "../src/routes.js";
import { inProcessForFile } from "./helpers/in-process.js";

const q = inProcessForFile();

describe("GET /v1/openapi.json", () => {
  let doc: any;

  it("is served without a credential and is a valid OpenAPI 3.1 document", async () => {
    const r = await q.request("GET", "/v1/openapi.json");
    expect(r.status).toBe(200);
    doc = r.json;
    expect(doc.openapi).toBe("3.1.0");
    const v = new Validator();
    const result = await v.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(v.version).toBe("3.1");
  });

  it("has every route of the route table, with its operation id and role", () => {
    const documented = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    expect(documented.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
    for (const r of routes) {
      const op = doc.paths[r.path][r.method.toLowerCase()];
      expect(op.operationId).toBe(r.value.name);
      expect(op["x-quiver-role"]).toBe(r.value.role);
      expect(op.security).toEqual(r.value.role === "public" ? [] : [{ ApiKey: [] }, { Bearer: [] }]);
    }
    const ids = routes.map((r) => r.value.name);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("declares the API-key and bearer security schemes and the error body", () => {
    expect(doc.components.securitySchemes).toMatchObject({
      ApiKey: { type: "apiKey", in: "header", name: "x-api-key" },
      Bearer: { type: "http", scheme: "bearer" },
    });
    expect(doc.components.schemas.ErrorResponse.required.sort()).toEqual(["code", "detail", "error", "instance", "status", "title", "type"]);
    const create = doc.paths["/v1/table/{id}/create_index"].post;
    expect(create.responses["403"].$ref).toBe("#/components/responses/Error403");
    expect(doc.components.responses.Error403.content["application/json"].schema.$ref).toBe("#/components/schemas/ErrorResponse");
  });

  it("takes request bodies from the TypeBox schemas, and names path and query parameters", () => {
    const create = doc.paths["/v1/table/{id}/create_index"].post;
    const body = create.requestBody.content["application/json"].schema;
    expect(body.required).toEqual(expect.arrayContaining(["column", "index_type"]));
    expect(body.properties.num_partitions).toBeDefined();
    expect(create.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: "id", in: "path", required: true }), expect.objectContaining({ name: "delimiter", in: "query" })]));
    const stats = doc.paths["/v1/table/{id}/index/{index_name}/stats"].post;
    expect(stats.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(["id", "index_name"]));
    const query = doc.paths["/v1/table/{id}/query"].post;
    expect(Object.keys(query.responses["200"].content)).toEqual(["application/vnd.apache.arrow.file"]);
    expect(Object.keys(doc.paths["/v1/table/{id}/insert"].post.requestBody.content)).toEqual(["application/vnd.apache.arrow.stream"]);
    const list = doc.paths["/v1/namespace/{id}/table/list"].get;
    expect(list.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(["page_token", "limit"]));
    expect(doc.paths["/metrics"].get["x-quiver-role"]).toBe("read");
  });
});
