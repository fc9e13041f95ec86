// What the route table (src/routes.ts) says of one route, as the pipeline reads it. The table is
// passed in (createPipeline), so this layer does not import it.
import type { Principal, Role } from "../auth/principal.js";
import type { Operation } from "../operations/define.js";

/**
 * How the path id is checked against the caller's namespace prefixes:
 * `object` — the id must lie inside a prefix; `browse` — inside or above one (listings filter
 * what they return); `none` — the id is not a catalog object (transactions check their table).
 */
export type Scope = "object" | "browse" | "none";

interface RouteBase {
  scope: Scope;
  /** Operation id in upstream's spec, for the API overview and logs. */
  name: string;
}

/**
 * The least role a credential needs, and the operation. A "public" route needs no credential and
 * takes no admission slot, so its operation is one that is given no principal (publicOp); so is a
 * route that a configuration flag (`publicWith`) may make public.
 */
export type RouteSpec = RouteBase &
  (
    | { role: Role; op: Operation; publicWith?: undefined }
    | { role: Role | "public"; op: Operation<Principal | null>; publicWith?: "metricsPublic" }
  );

/**
 * Whether a request of this route holds an execution slot (of --max-in-flight). Public routes and
 * those a flag may make public (health, readiness, metrics) never do: a saturated replica must
 * still answer its checks and scrapes, or it looks down instead of busy.
 */
export const takesSlot = (spec: RouteSpec): boolean => spec.role !== "public" && spec.publicWith === undefined;
