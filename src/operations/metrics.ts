// GET /metrics: the Prometheus text exposition of src/metrics.ts's registry.
import { metricsContentType, renderMetrics } from "../metrics.js";
import { queryOp } from "./define.js";

export const getMetrics = queryOp(
  async () => ({ kind: "bytes", contentType: metricsContentType, chunks: [Buffer.from(await renderMetrics())] }),
  { produces: "text/plain" },
);
