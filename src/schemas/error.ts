// The error body every failure answers (docs/contract.md, "Errors"), for the OpenAPI document.
import { Type, type Static } from "@sinclair/typebox";
import type { ErrorBody } from "../errors.js";

export const ErrorResponse = Type.Object(
  {
    type: Type.String({ description: "a URI reference naming the kind of error, e.g. /errors/not-found-error" }),
    title: Type.String(),
    status: Type.Integer({ description: "the HTTP status" }),
    detail: Type.String({ description: "what went wrong, naming the field or object" }),
    instance: Type.String({ description: "the request path" }),
    code: Type.Integer({ description: "lance-namespace error code" }),
    error: Type.String({ description: "the same as detail, for LanceDB's clients" }),
  },
  { additionalProperties: false },
);

// The schema and the type errorBody() returns must agree both ways (exported so that the check is not
// an unused local).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const errorSchemaMatches: Same<Static<typeof ErrorResponse>, ErrorBody> = true;
