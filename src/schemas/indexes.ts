// Request bodies of the index operations (lance-namespace `CreateTableIndexRequest` and the index listings).
import { Type } from "@sinclair/typebox";
import { INDEX, MAX_INT32 } from "./bounds.js";
import { branch, common, FieldPath, Opt, UInt } from "./common.js";

const Pos = (maximum: number) => Opt(Type.Integer({ minimum: 1, maximum }));

export const IndexName = Type.String({ minLength: 1, maxLength: 256, pattern: "^[^\\x00-\\x1f\\x7f/\\\\]+$" });

/**
 * Full-text options LanceDB's client sends with every index build, at these values unless its
 * caller set others. This server's engine builds with these values only; another is refused.
 */
export const CLIENT_FTS_DEFAULTS = {
  block_size: 128,
  custom_stop_words: null,
  index_operators: false,
  lance_tokenizer: null,
  max_ngram_length: 3,
  min_ngram_length: 3,
  prefix_only: false,
  preserve_original: false,
  split_identifiers: false,
  split_on_numerics: false,
} as const;

export const CreateIndex = Type.Object({
  ...common,
  ...branch,
  column: FieldPath,
  index_type: Type.String({ minLength: 1 }),
  name: Opt(IndexName),
  distance_type: Opt(Type.String()),
  num_partitions: Pos(INDEX.partitions),
  num_sub_vectors: Pos(INDEX.subVectors),
  num_bits: Pos(INDEX.bits),
  sample_rate: Pos(INDEX.sampleRate),
  max_iterations: Pos(INDEX.iterations),
  target_partition_size: Pos(INDEX.targetPartitionSize),
  m: Pos(INDEX.hnswM),
  ef_construction: Pos(INDEX.efConstruction),
  with_position: Opt(Type.Boolean()),
  base_tokenizer: Opt(Type.String()),
  language: Opt(Type.String()),
  max_token_length: Opt(UInt({ maximum: INDEX.tokenLength })),
  lower_case: Opt(Type.Boolean()),
  stem: Opt(Type.Boolean()),
  remove_stop_words: Opt(Type.Boolean()),
  ascii_folding: Opt(Type.Boolean()),
  replace: Opt(Type.Boolean({ description: "Replace an index of the same type on the same column (or of the same name) instead of answering 409: the old one is dropped, then the new one is built" })),
  block_size: Opt(Type.Integer({ minimum: 0, maximum: INDEX.blockSize })),
  custom_stop_words: Opt(Type.Array(Type.String())),
  index_operators: Opt(Type.Boolean()),
  lance_tokenizer: Opt(Type.String()),
  max_ngram_length: Opt(UInt({ maximum: INDEX.ngramLength })),
  min_ngram_length: Opt(UInt({ maximum: INDEX.ngramLength })),
  prefix_only: Opt(Type.Boolean()),
  preserve_original: Opt(Type.Boolean()),
  split_identifiers: Opt(Type.Boolean()),
  split_on_numerics: Opt(Type.Boolean()),
});

const at = { ...common, ...branch, version: Opt(UInt()) };

export const ListIndices = Type.Object({ ...at, page_token: Opt(Type.String()), limit: Opt(Type.Integer({ minimum: 1, maximum: MAX_INT32 })) });
export const IndexStats = Type.Object({ ...at, index_name: Opt(Type.String()) });
export const DropIndex = Type.Object({ ...common, ...branch });
