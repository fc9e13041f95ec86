// GET /metrics: the Prometheus text exposition of src/metrics.ts's registry.
import { metricsContentType, renderMetrics } from "../metrics.js";
import { publicOp } from "./define.js";

export const getMetrics = publicOp(
  async () => ({ kind: "bytes", contentType: metricsContentType, chunks: [Buffer.from(await renderMetrics())] }),
  { produces: "text/plain" },
);
