// Request bodies of LanceDB's LSM write-path calls, in the shape its remote client sends them
// (`/v1/table/{id}/set_lsm_write_spec/` and the rest).
import { Type } from "@sinclair/typebox";
import { common, Mode, Opt, StringMap } from "./common.js";

export const SetLsmWriteSpec = Type.Object({
  ...common,
  sharding: Type.Object({
    mode: Mode("bucket", "identity", "unsharded"),
    column: Opt(Type.String({ minLength: 1 })),
    num_buckets: Opt(Type.Integer({ minimum: 1, maximum: 1024 })),
  }),
  /** null: every index the table has when the spec is installed; []: none. */
  maintained_indexes: Opt(Type.Array(Type.String())),
  writer_config_defaults: Opt(StringMap),
});

export const GetLsmStats = Type.Object({ ...common, include_generation_rows: Opt(Type.Boolean()) });
