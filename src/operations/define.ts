// An operation is described once: how its body is read, its request schema and its handler.
import type { Static, TSchema } from "@sinclair/typebox";
import { compile, type Validator } from "../schemas/validate.js";
import { unsupported } from "../errors.js";
import type { Handler } from "./types.js";

export type BodyKind = "json" | "arrow" | "none";

export interface Operation {
  body: BodyKind;
  /** Its answer may be a large stream the engine computes as it is sent: it waits for a turn first. */
  streamsResults?: boolean;
  validate?: Validator<unknown>;
  handler: Handler;
}

export function jsonOp<S extends TSchema>(schema: S, handler: Handler<Static<S>>): Operation {
  return { body: "json", validate: compile(schema), handler: handler as Handler };
}

/** Mark an operation whose answer may be a large engine stream (see Operation.streamsResults). */
export const streaming = (op: Operation): Operation => ({ ...op, streamsResults: true });

/** Operations whose inputs are the path and query only; any body is ignored. */
export const queryOp = (handler: Handler<undefined>): Operation => ({ body: "none", handler });

/** Operations that take an Arrow IPC stream body; options arrive as query parameters. */
export const arrowOp = (handler: Handler<undefined>): Operation => ({ body: "arrow", handler });

/** A route that exists in the spec but whose feature has not landed: 406 with the spec's body. */
export const notImplemented = (what: string): Operation => ({
  body: "none",
  handler: async () => {
    throw unsupported(`${what} is not implemented by this server yet`);
  },
});
