// LanceDB's cache-warming requests (its remote client's `index/{name}/prewarm`).
import { Type } from "@sinclair/typebox";
import { branch, common } from "./common.js";

export const PrewarmIndex = Type.Object({ ...common, ...branch });
