// Request bodies of the index operations (lance-namespace `CreateTableIndexRequest` and the index listings).
import { Type } from "@sinclair/typebox";
import { branch, common, FieldPath, Opt, UInt } from "./common.js";

const Pos = () => Opt(Type.Integer({ minimum: 1 }));

export const IndexName = Type.String({ minLength: 1, maxLength: 256, pattern: "^[^\\x00-\\x1f\\x7f/\\\\]+$" });

export const CreateIndex = Type.Object({
  ...common,
  ...branch,
  column: FieldPath,
  index_type: Type.String({ minLength: 1 }),
  name: Opt(IndexName),
  distance_type: Opt(Type.String()),
  num_partitions: Pos(),
  num_sub_vectors: Pos(),
  num_bits: Pos(),
  sample_rate: Pos(),
  max_iterations: Pos(),
  target_partition_size: Pos(),
  m: Pos(),
  ef_construction: Pos(),
  with_position: Opt(Type.Boolean()),
  base_tokenizer: Opt(Type.String()),
  language: Opt(Type.String()),
  max_token_length: Opt(UInt()),
  lower_case: Opt(Type.Boolean()),
  stem: Opt(Type.Boolean()),
  remove_stop_words: Opt(Type.Boolean()),
  ascii_folding: Opt(Type.Boolean()),
  replace: Opt(Type.Boolean({ description: "Replace an index of the same type on the same column (or of the same name) instead of answering 409: the old one is dropped, then the new one is built" })),
});

const at = { ...common, ...branch, version: Opt(UInt()) };

export const ListIndices = Type.Object({ ...at, page_token: Opt(Type.String()), limit: Opt(Type.Integer({ minimum: 1 })) });
export const IndexStats = Type.Object({ ...at, index_name: Opt(Type.String()) });
export const DropIndex = Type.Object({ ...common, ...branch });
