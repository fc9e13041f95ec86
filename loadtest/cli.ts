#!/usr/bin/env node
// quiver-loadtest (npm run loadtest, npx quiver-loadtest): runs a load test and writes its report
// as PREFIX.json and PREFIX.html, puts two reports side by side (--compare) or merges reports of
// several hosts (--merge). Exit codes: 0 done, 2 bad option or input, 3 a --threshold failed, 1 else.
import { readFileSync, writeFileSync } from "node:fs";
import { GENERATOR_ENV } from "./generators.js";
import { childGate } from "./handshake.js";
import { comparePage, reportPage } from "./html.js";
import { badInput, isBadInput } from "./input-error.js";
import { mergeReports } from "./merge.js";
import { HELP, parseCommand, type Options } from "./options.js";
import { harnessVersion } from "./report.js";
import { runLoadtest, type Report } from "./run.js";
import { summaryText } from "./summary.js";

function readReport(file: string): Report {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Report;
  } catch (e) {
    throw badInput(`${file}: ${(e as Error).message}`);
  }
}

function write(prefix: string, report: Report): void {
  writeFileSync(`${prefix}.json`, JSON.stringify(report, null, 1));
  writeFileSync(`${prefix}.html`, reportPage(report));
}

async function main(argv: string[]): Promise<number> {
  // A generator started by --generators: options from the environment, the report on stdout.
  const child = process.env[GENERATOR_ENV];
  if (child) {
    const gate = childGate();
    try {
      process.stdout.write(JSON.stringify(await runLoadtest(JSON.parse(child) as Options, process.stderr, undefined, gate)));
    } finally {
      gate.close();
    }
    return 0;
  }
  let cmd;
  try {
    cmd = parseCommand(argv);
  } catch (e) {
    process.stderr.write(`quiver-loadtest: ${(e as Error).message}\nquiver-loadtest --help lists the options.\n`);
    return 2;
  }
  if ("help" in cmd) {
    process.stdout.write(HELP);
    return 0;
  }
  if ("version" in cmd) {
    process.stdout.write(`quiver-loadtest ${harnessVersion()}\n`);
    return 0;
  }
  if ("compare" in cmd) {
    const [a, b] = cmd.compare.map(readReport);
    writeFileSync(`${cmd.out}.html`, comparePage(a, b, cmd.compare));
    process.stdout.write(`${cmd.out}.html\n`);
    return 0;
  }
  if ("merge" in cmd) {
    const merged = mergeReports(cmd.merge.map(readReport), cmd.merge);
    write(cmd.out, merged);
    process.stdout.write(`${summaryText(merged)}\nreport: ${cmd.out}.json ${cmd.out}.html\n`);
    return 0;
  }
  // Ctrl-C once: stop sending, wait for the answers in flight, write the report; twice: exit now.
  const stop = new AbortController();
  process.once("SIGINT", () => {
    process.stderr.write("\nquiver-loadtest: stopping (Ctrl-C again to quit without a report)\n");
    stop.abort();
    process.once("SIGINT", () => process.exit(130));
  });
  const report = await runLoadtest(cmd.run, process.stderr, stop.signal);
  write(cmd.run.out, report);
  for (const w of report.warnings) process.stderr.write(`quiver-loadtest: ${w}\n`);
  process.stdout.write(`${summaryText(report)}\nreport: ${cmd.run.out}.json ${cmd.run.out}.html\n`);
  return report.thresholds && !report.thresholds.pass ? 3 : 0;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (e: Error) => {
    process.stderr.write(`quiver-loadtest: ${e.message}\n`);
    process.exitCode = isBadInput(e) ? 2 : 1;
  },
);
