// One load test from options to report: the dataset and its load phase (when given), the sources,
// a warmup, then the measurement in the chosen mode (a closed or open loop, repeated; an SLO
// search; a recall–QPS sweep; recall alone; or the loops of several generator processes), and
// last the warnings about the harness's own limits and the thresholds.
import { closedLoop, DISCARD, openLoop, type Load, type Sink } from "./drive.js";
import { loadDataset, type Dataset } from "./datasets.js";
import { runGenerators } from "./generators.js";
import type { Gate } from "./handshake.js";
import { baseHeaders, callJson, client, type Client } from "./http.js";
import { loadPhase } from "./load-phase.js";
import { measure } from "./measure.js";
import { mergeClients, mergeRuns } from "./merge.js";
import { interval } from "./noise.js";
import type { Options } from "./options.js";
import { progress } from "./progress.js";
import { rampSearch } from "./ramp.js";
import { datasetTruth, exactSearch, measureRecall, type RecallFigures, type TruthSource } from "./recall.js";
import { harnessVersion, machine, type RepeatRow, type Report, type RunRecord } from "./report.js";
import { loadSources, tablePath, type Sources } from "./sources.js";
import { identicalPoints, runSweep, sweepPoints } from "./sweep.js";
import { evaluate } from "./thresholds.js";
import { toArrays } from "./vector-files.js";
import { clientLimit, failures } from "./warnings.js";
import { requests } from "./workload.js";

export type { Report } from "./report.js";

async function serverVersion(c: Client, headers: Record<string, string>): Promise<string | null> {
  try {
    return ((await callJson(c, headers, "GET", "/v1/openapi.json")) as { info?: { version?: string } }).info?.version ?? null;
  } catch {
    return null;
  }
}

const redactHeaders = (h: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(h).map(([k, v]) => [k, /authorization|api-key|token|secret|cookie/i.test(k) ? "<redacted>" : v]));

const sleepUntil = (t: number) => new Promise((res) => setTimeout(res, Math.max(0, t - Date.now())));

/** Reads the table's stats, so the server's quiver_table_* gauges hold its state before the run (and after). */
async function touchStats(c: Client, headers: Record<string, string>, table: string): Promise<void> {
  if (table) await callJson(c, headers, "POST", tablePath(table, "stats"), {}).catch(() => undefined);
}

function repeatRow(r: RunRecord): RepeatRow {
  const pts = r.server?.points ?? [];
  return {
    throughput: r.run.throughput,
    errors: r.run.errors,
    p50: r.run.latency_ms.p50,
    p95: r.run.latency_ms.p95,
    p99: r.run.latency_ms.p99,
    p999: r.run.latency_ms.p999,
    max: r.run.latency_ms.max,
    service_p50: r.run.service_ms.p50,
    service_p99: r.run.service_ms.p99,
    best_rate: r.ramp?.best_rate ?? null,
    server_cpu: pts.length ? pts.reduce((a, p) => a + p.cpu_cores, 0) / pts.length : null,
  };
}

/** Every figure's median and range over the runs, and which run to show: the one of median throughput (SLO search: best rate). */
function repeats(records: RunRecord[]): NonNullable<Report["repeats"]> {
  const rows = records.map(repeatRow);
  const intervals: NonNullable<Report["repeats"]>["intervals"] = {};
  for (const key of Object.keys(rows[0]) as (keyof RepeatRow)[]) {
    const xs = rows.map((r) => r[key]).filter((v): v is number => v !== null);
    if (xs.length) intervals[key] = interval(xs);
  }
  const by = (r: RepeatRow) => r.best_rate ?? r.throughput;
  const order = rows.map((r, i) => [by(r), i] as const).sort((a, b) => a[0] - b[0]);
  return { rows, intervals, shown: order[(order.length - 1) >> 1][1] };
}

/** `signal` stops the measured part early; the report then covers what ran (`interrupted`). */
/** `gate`: where a generator child waits for its parent (--generators), once ready and once warm. */
export async function runLoadtest(o: Options, out: NodeJS.WriteStream = process.stderr, signal?: AbortSignal, gate?: Gate): Promise<Report> {
  const started = new Date();
  const headers = baseHeaders(o.apiKey, o.headers);
  const aux = client(o.url, 1, o.timeout * 1000);
  const load = client(o.url, o.connections, o.timeout * 1000);
  const show = progress(o.quiet, out);
  const log = (line: string) => (o.quiet ? undefined : out.write(`${line}\n`));
  try {
    const server = await serverVersion(aux, headers);
    const { apiKey: _key, ...withoutKey } = o;
    const report: Report = {
      tool: "quiver-loadtest",
      started_at: started.toISOString(),
      finished_at: "",
      options: { ...withoutKey, headers: redactHeaders(o.headers) },
      machine: machine(),
      versions: { node: process.version, harness: harnessVersion(), server },
      mode: o.mode,
      dataset: null,
      load: null,
      run: null,
      client: null,
      server: null,
      ramp: null,
      repeats: null,
      sweep: null,
      recall: null,
      warnings: [],
      thresholds: null,
      merged: null,
      interrupted: false,
    };
    let dataset: Dataset | null = null;
    if (o.dataset) {
      dataset = await loadDataset(o as Options & { dataset: string }, log);
      const { name, description, dir, truth_source, truth_seconds } = dataset;
      report.dataset = { name, description, rows: dataset.base.count, dim: dataset.base.dim, queries: dataset.queries.count, truth_source, truth_seconds, dir };
      const writer = client(o.url, o.loadConcurrency, Math.max(o.timeout, 600) * 1000);
      try {
        report.load = await loadPhase(writer, headers, dataset, { table: o.table, batch: o.loadBatch, concurrency: o.loadConcurrency, index: o.index, indexParams: o.indexParams, distance: o.distance, reload: o.reload }, log);
      } finally {
        writer.close();
      }
    }
    const sources = await loadSources(o, aux, headers, dataset ? toArrays(dataset.queries) : undefined);
    const truth: TruthSource = dataset ? datasetTruth(dataset.truth) : exactSearch();
    if (!dataset && !o.queries && (o.mode === "recall" || o.sweep.length)) {
      report.warnings.push("recall: the query vectors were sampled from the table's own rows (--sampled-queries): each finds itself, so recall reads higher than for queries the table does not hold");
    }
    if (o.startAt !== null) await sleepUntil(o.startAt);
    await gate?.ready();
    if (o.metrics) await touchStats(aux, headers, o.table);
    const records: RunRecord[] = [];
    if (o.mode === "recall") {
      report.recall = await measureRecall(o, aux, headers, sources.vectors, truth);
    } else if (o.generators > 1) {
      records.push(await generatorRun(o, aux, headers, out, report));
    } else if (o.sweep.length) {
      records.push(await sweepRun(o, aux, load, headers, sources, truth, show, report, signal));
    } else {
      const next = requests(o, sources, headers);
      const l = (sink: Sink, seconds: number, first: number): Load => ({ client: load, next, sink, connections: o.connections, seconds, first, signal });
      const firstRate = o.mode === "ramp" ? o.rampStart : o.rate;
      const drive = (ld: Load, rate: number) => (o.mode === "closed" ? closedLoop(ld) : openLoop(ld, rate));
      let first = o.warmup > 0 ? (await drive(l(DISCARD, o.warmup, 0), firstRate)).sent : 0;
      await gate?.warmed();
      for (let r = 0; r < o.repeat && !(r > 0 && signal?.aborted); r++) {
        const measured = await measure(o, aux, headers, show, async (m) => {
          const round = o.repeat > 1 ? ` ${r + 1}/${o.repeat}` : "";
          if (o.mode === "ramp") return rampSearch(o, m, l, first, signal);
          m.tick.label = (o.mode === "closed" ? `closed ${o.connections} conn` : `open ${o.rate}/s`) + round;
          return { driven: await drive(l(m.rec, o.duration, first), o.rate), ramp: null };
        });
        first += measured.driven.sent;
        records.push({
          run: { ...measured.figures, ...measured.driven, connections: o.connections, target_rate: o.mode === "open" ? o.rate : null },
          client: measured.client,
          server: measured.server,
          ramp: measured.ramp,
        });
      }
    }
    if (records.length) {
      const rep = o.repeat > 1 && records.length > 1 && !o.sweep.length ? repeats(records) : null;
      const shown = records[rep?.shown ?? records.length - 1];
      Object.assign(report, { run: shown.run, client: shown.client, server: shown.server, ramp: shown.ramp, repeats: rep });
      const processes = report.merged?.parts ?? 1;
      report.warnings.push(...new Set(records.flatMap((r) => [...failures(r.run), ...clientLimit(r.run, r.client, r.server, processes)])));
      if (o.metrics) await touchStats(aux, headers, o.table);
    }
    report.interrupted = signal?.aborted ?? false;
    if (o.thresholds.length) report.thresholds = evaluate(o.thresholds, report);
    report.finished_at = new Date().toISOString();
    return report;
  } finally {
    show.end();
    aux.close();
    load.close();
  }
}

/** The sweep: a recall pass per point first (one search at a time), then the timed rounds. */
async function sweepRun(
  o: Options,
  aux: Client,
  load: Client,
  headers: Record<string, string>,
  sources: Sources,
  truth: TruthSource,
  show: ReturnType<typeof progress>,
  report: Report,
  signal?: AbortSignal,
): Promise<RunRecord> {
  const needsRecall = o.workloads.some((w) => w.kind === "vector");
  const recalls: (RecallFigures | null)[] | null = needsRecall ? [] : null;
  for (const params of needsRecall ? sweepPoints(o.sweep) : []) {
    // A point the server refuses (a field out of its range) is measured anyway: its errors show in its runs.
    recalls!.push(
      await measureRecall(o, aux, headers, sources.vectors, truth, params).catch((e: Error) => {
        report.warnings.push(`sweep point ${Object.entries(params).map(([k, v]) => `${k}=${v}`).join(" ")}: recall not measured: ${e.message}`);
        return null;
      }),
    );
  }
  const measured = await measure(o, aux, headers, show, (m) =>
    runSweep(
      o,
      m,
      (sink, seconds, params) => ({ client: load, next: requests({ ...o, extra: { ...o.extra, ...params } }, sources, headers), sink, connections: o.connections, seconds, first: 0, signal }),
      recalls,
      signal,
    ),
  );
  report.sweep = measured.sweep;
  report.warnings.push(...identicalPoints(measured.sweep.points));
  const { figures, driven } = measured;
  // The recorder's time runs through the warm-ups too; the throughput is the measured loops' own.
  return { run: { ...figures, ...driven, throughput: driven.seconds ? figures.ok / driven.seconds : 0, connections: o.connections, target_rate: null }, client: measured.client, server: measured.server, ramp: null };
}

/** The loops of --generators child processes, merged, with the server scraped by this process over the same time. */
async function generatorRun(o: Options, aux: Client, headers: Record<string, string>, out: NodeJS.WritableStream, report: Report): Promise<RunRecord> {
  const children = runGenerators(o, (line) => out.write(`${line}\n`));
  children.reports.catch(() => undefined);
  // Sources read: the warmups start together; warm: the loops start once the first sample is taken.
  await children.waiting();
  children.go();
  await children.waiting();
  const measured = await measure(o, aux, headers, progress(true), async (m) => {
    m.tick.label = `${o.generators} generators`;
    children.go();
    const reports = await children.reports;
    return { driven: { sent: 0, seconds: m.tick.elapsed(), unsent: 0, late: 0, max_backlog: 0 }, reports };
  });
  const run = mergeRuns(measured.reports.map((r) => r.run!));
  report.merged = { parts: o.generators, sources: measured.reports.map((_, i) => `generator ${i + 1}`) };
  return { run, client: mergeClients(measured.reports.map((r) => r.client!), run.requests), server: measured.server, ramp: null };
}
