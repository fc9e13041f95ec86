// Request bodies of the transaction operations (lance-namespace `AlterTransactionRequest`).
import { Type } from "@sinclair/typebox";
import { MAX_INT32 } from "./bounds.js";
import { common, Mode, Opt } from "./common.js";

const Key = Type.String({ minLength: 1 });

const Action = Type.Object({
  setStatusAction: Type.Optional(Type.Object({ status: Type.String({ minLength: 1 }) })),
  setPropertyAction: Type.Optional(Type.Object({ key: Key, value: Type.String(), mode: Type.Optional(Mode("overwrite", "fail", "skip")) })),
  unsetPropertyAction: Type.Optional(Type.Object({ key: Key, mode: Type.Optional(Mode("skip", "fail")) })),
});

export const DescribeTransaction = Type.Object({ ...common });
export const AlterTransaction = Type.Object({ ...common, actions: Type.Array(Action, { minItems: 1 }) });

/** LanceDB's jobs listing (`POST /v1/jobs/list`), plus a filter by table (path id) of Quiver's. */
export const ListJobs = Type.Object({
  ...common,
  page_token: Opt(Type.String()),
  limit: Opt(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
  table: Opt(Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String())])),
});

/** LanceDB's job calls name one job by id. */
export const JobRef = Type.Object({ ...common, job_id: Type.String({ minLength: 1 }) });
