// The OpenAPI 3.1 document (GET /v1/openapi.json), generated from the route table and the
// operations' TypeBox schemas, so it describes exactly what the router serves and validates.
import type { TSchema } from "@sinclair/typebox";
import type { Operation } from "../operations/define.js";
import { ErrorResponse } from "../schemas/error.js";
import { packageVersion } from "../util/package-version.js";

/** A route as the route table holds it (src/routes.ts). */
export interface DocumentedRoute {
  method: string;
  path: string;
  value: { op: Operation; role: string; scope: string; name: string; publicWith?: string };
}

const ARROW_STREAM = "application/vnd.apache.arrow.stream";
const ERROR_STATUSES: Record<string, string> = {
  "400": "the request is malformed (the detail names the field)",
  "401": "no valid credential",
  "403": "the credential's role or namespaces do not allow this",
  "404": "the object named does not exist",
  "409": "a conflict: the object exists, or changed concurrently",
  "503": "overloaded or shutting down; retry after the Retry-After seconds",
};

/** TypeBox keeps its bookkeeping in symbol keys; JSON keeps only the JSON Schema. */
const plain = (s: TSchema) => JSON.parse(JSON.stringify(s)) as Record<string, unknown>;

const section = (path: string) => {
  const parts = path.split("/").filter(Boolean);
  return parts[0] === "v1" && !parts[1].includes(".") ? parts[1] : "server";
};

function parameters(r: DocumentedRoute) {
  const out: Record<string, unknown>[] = [];
  for (const m of r.path.matchAll(/\{([^}]+)\}/g)) {
    const description = m[1] === "id" ? "the object's id, its parts joined by the delimiter (default `$`)" : undefined;
    out.push({ name: m[1], in: "path", required: true, schema: { type: "string" }, ...(description ? { description } : {}) });
  }
  if (r.path.includes("{id}")) out.push({ name: "delimiter", in: "query", required: false, schema: { type: "string", default: "$" }, description: "separator of the id's parts" });
  const q = r.value.op.query;
  if (q) {
    const required = new Set(q.required ?? []);
    for (const [name, schema] of Object.entries(q.properties)) {
      const { description, ...rest } = plain(schema as TSchema);
      out.push({ name, in: "query", required: required.has(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  return out;
}

function requestBody(op: Operation) {
  if (op.body === "json" && op.schema) return { required: false, content: { "application/json": { schema: plain(op.schema) } } };
  if (op.body === "arrow") return { required: true, content: { [ARROW_STREAM]: { schema: { type: "string", contentMediaType: ARROW_STREAM } } } };
  return undefined;
}

function operation(r: DocumentedRoute) {
  const { op, role, name, publicWith } = r.value;
  const open = role === "public";
  const body = requestBody(op);
  const success = op.produces ? { [op.produces]: { schema: { type: "string", contentMediaType: op.produces } } } : { "application/json": { schema: { type: "object" } } };
  const errors = Object.fromEntries(
    Object.entries(ERROR_STATUSES)
      .filter(([s]) => !open || (s !== "401" && s !== "403") || publicWith)
      .map(([s, description]) => [s, { $ref: `#/components/responses/Error${s}`, description }]),
  );
  return {
    operationId: name,
    summary: name,
    tags: [section(r.path)],
    description: open ? "Needs no credential." : `Needs the ${role} role${publicWith ? ` (no credential with --${publicWith.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)})` : ""}.`,
    "x-quiver-role": role,
    security: open ? [] : [{ ApiKey: [] }, { Bearer: [] }],
    parameters: parameters(r),
    ...(body ? { requestBody: body } : {}),
    responses: { "200": { description: "success", content: success }, ...errors },
  };
}

export function openApiDocument(routes: readonly DocumentedRoute[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) (paths[r.path] ??= {})[r.method.toLowerCase()] = operation(r);
  const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse" } } } });
  return {
    openapi: "3.1.0",
    info: {
      title: "Quiver",
      version: packageVersion(),
      description: "A REST server for Lance tables, implementing the lance-namespace REST protocol. Queries answer Arrow IPC.",
    },
    servers: [{ url: "/" }],
    paths,
    components: {
      schemas: { ErrorResponse: plain(ErrorResponse) },
      responses: Object.fromEntries(Object.entries(ERROR_STATUSES).map(([s, d]) => [`Error${s}`, errorResponse(d)])),
      securitySchemes: {
        ApiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "an API key (--api-keys)" },
        Bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "a JWT verified against --jwt-jwks-url or --jwt-public-key" },
      },
    },
  };
}
