// What the route table (src/routes.ts) says of one route, as the pipeline reads it. The table is
// passed in (createPipeline), so this layer does not import it.
import type { Role } from "../auth/principal.js";
import type { Operation } from "../operations/define.js";

/**
 * How the path id is checked against the caller's namespace prefixes:
 * `object` — the id must lie inside a prefix; `browse` — inside or above one (listings filter
 * what they return); `none` — the id is not a catalog object (transactions check their table).
 */
export type Scope = "object" | "browse" | "none";

export interface RouteSpec {
  op: Operation;
  /** The least role a credential needs; "public" routes need no credential and take no admission slot. */
  role: Role | "public";
  scope: Scope;
  /** Operation id in upstream's spec, for the API overview and logs. */
  name: string;
  /** A configuration flag that, when set, makes the route need no credential. */
  publicWith?: "metricsPublic";
}
