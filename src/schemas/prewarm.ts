// LanceDB's cache-warming requests (its remote client's `index/{name}/prewarm` and `page_cache/prewarm`).
import { Type } from "@sinclair/typebox";
import { branch, common, Opt } from "./common.js";

export const PrewarmIndex = Type.Object({ ...common, ...branch });
export const PrewarmData = Type.Object({ ...common, ...branch, columns: Opt(Type.Array(Type.String({ minLength: 1 }))) });
