// GET /metrics: the Prometheus text exposition of src/metrics.ts's registry. A credential limited to
// namespace prefixes sees the series of the objects it covers only (docs/security.md, "Metrics");
// one without prefixes, or a public scrape (--metrics-public), sees them all.
import { covers } from "../auth/principal.js";
import { SEP } from "../catalog/names.js";
import { metricsContentType, renderMetrics } from "../metrics.js";
import { publicOp } from "./define.js";

export const getMetrics = publicOp(
  async ({ principal }) => {
    const visible = principal && principal.prefixes !== null ? (objectId: string) => covers(principal, objectId.split(SEP)) : undefined;
    return { kind: "bytes", contentType: metricsContentType, chunks: [Buffer.from(await renderMetrics(visible))] };
  },
  { produces: "text/plain" },
);
