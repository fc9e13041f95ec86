#!/usr/bin/env node
// quiver-loadtest (npm run loadtest, npx quiver-loadtest): runs a load test and writes its report
// as PREFIX.json and PREFIX.html, or with --compare puts two reports side by side.
import { readFileSync, writeFileSync } from "node:fs";
import { comparePage, reportPage } from "./html.js";
import { HELP, parseCommand } from "./options.js";
import { runLoadtest, type Report } from "./run.js";
import { summaryText } from "./summary.js";

async function main(argv: string[]): Promise<number> {
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
  if ("compare" in cmd) {
    const [a, b] = cmd.compare.map((f) => JSON.parse(readFileSync(f, "utf8")) as Report);
    writeFileSync(`${cmd.out}.html`, comparePage(a, b, cmd.compare));
    process.stdout.write(`${cmd.out}.html\n`);
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
  writeFileSync(`${cmd.run.out}.json`, JSON.stringify(report, null, 1));
  writeFileSync(`${cmd.run.out}.html`, reportPage(report));
  process.stdout.write(`${summaryText(report)}\nreport: ${cmd.run.out}.json ${cmd.run.out}.html\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (e: Error) => {
    process.stderr.write(`quiver-loadtest: ${e.message}\n`);
    process.exitCode = 1;
  },
);
