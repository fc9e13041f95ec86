// The check that a version still has its files, kept for the consistency interval
// (src/engine/version-checks.ts): what keeps it, and what makes it look at storage again. On a
// LanceDB table whose first version's data file is removed after the check, as a cleanup by
// another process would.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createVersionChecks, type VersionChecks } from "../../src/engine/version-checks.js";

const root = mkdtempSync(path.join(tmpdir(), "quiver-version-checks-"));
const dir = path.join(root, "t.lance");
afterAll(() => rmSync(root, { recursive: true, force: true }));

const INTERVAL_MS = 1000;
/** Moved on by the first test only: the others' answers stay within the interval. */
let clock = 0;
const checks = (intervalMs = INTERVAL_MS, now = () => 0) => createVersionChecks(intervalMs, now);
// Each checked version 1 while its file was there.
const kept: Record<"plain" | "forgotten" | "cleaned", VersionChecks> = { plain: checks(INTERVAL_MS, () => clock), forgotten: checks(), cleaned: checks() };
let removed = "";

beforeAll(async () => {
  const db = await lancedb.connect(root);
  await db.createTable("t", [{ a: 1 }]);
  const [file] = readdirSync(path.join(dir, "data"));
  for (const c of Object.values(kept)) expect(await c.gone(dir, 1)).toBeNull();
  rmSync(path.join(dir, "data", file));
  removed = `data/${file}`;
});

it("answers as last checked within the interval, and as storage is once it has passed", async () => {
  expect(await kept.plain.gone(dir, 1)).toBeNull();
  clock += INTERVAL_MS - 1;
  expect(await kept.plain.gone(dir, 1)).toBeNull();
  clock += 1;
  expect(await kept.plain.gone(dir, 1)).toBe(removed);
});

it("a recheck asks storage, and an interval of 0 always does", async () => {
  const c = checks();
  expect(await checks(0).gone(dir, 1)).toBe(removed);
  expect(await c.gone(dir, 1, true)).toBe(removed);
});

it("forgets a table's answers when told (a drop, a history change)", async () => {
  kept.forgotten.forget(dir);
  expect(await kept.forgotten.gone(dir, 1)).toBe(removed);
});

it("asks storage while a cleanup runs, and forgets what it kept from before", async () => {
  let end = () => {};
  kept.cleaned.cleaning(dir, new Promise<void>((r) => (end = r)));
  expect(await kept.cleaned.gone(dir, 1)).toBe(removed);
  end();
  await Promise.resolve();
  expect(await kept.cleaned.gone(dir, 1)).toBe(removed);
});
