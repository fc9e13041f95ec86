// An operation is described once: how its body is read, its request schema and its handler. The
// schemas (body and query parameters) also make the OpenAPI document (src/http/openapi.ts).
import type { Static, TObject, TSchema } from "@sinclair/typebox";
import { compileBody, compileParams, type ParamsValidator, type Validator } from "../schemas/validate.js";
import { unsupported } from "../errors.js";
import type { Principal } from "../auth/principal.js";
import type { Handler } from "./types.js";

export type BodyKind = "json" | "arrow" | "none";

/** What the OpenAPI document says of an operation beyond its body schema. */
export interface Described {
  /** Query parameters the handler reads (strings on the wire, coerced to what the schema says; `ctx.args`). */
  query?: TObject;
  /** Content type of a success when it is not JSON. */
  produces?: string;
}

/** `P`: what the handler is given as its caller (see OpContext). */
export interface Operation<P extends Principal | null = Principal> extends Described {
  body: BodyKind;
  /** The JSON body's schema (validated by `validate`). */
  schema?: TSchema;
  validate?: Validator<unknown>;
  /** The query parameters, from `query`. */
  args?: ParamsValidator<unknown>;
  handler: Handler<any, P>;
}

/** What an operation says of itself beyond its body, with its query parameters' parser. */
const described = (more: Described) => (more.query ? { ...more, args: compileParams(more.query) } : more);

export function jsonOp<S extends TSchema>(schema: S, handler: Handler<Static<S>>, more: Described = {}): Operation {
  return { body: "json", schema, validate: compileBody(schema), handler: handler as Handler, ...described(more) };
}

/** Operations whose inputs are the path and query only; any body is ignored. */
export const queryOp = (handler: Handler<undefined>, more: Described = {}): Operation => ({ body: "none", handler, ...described(more) });

/** Operations any client may call, with a credential or without one (then the principal is null). */
export const publicOp = (handler: Handler<undefined, Principal | null>, more: Described = {}): Operation<Principal | null> => ({
  body: "none",
  handler,
  ...described(more),
});

/** Operations that take an Arrow IPC stream body; options arrive as query parameters. */
export const arrowOp = (handler: Handler<undefined>, more: Described = {}): Operation => ({ body: "arrow", handler, ...described(more) });

/** A route that exists in the spec but whose feature has not landed: 406 with the spec's body. */
export const notImplemented = (what: string): Operation => ({
  body: "none",
  handler: async () => {
    throw unsupported(`${what} is not implemented by this server yet`);
  },
});
