// The web console (/console) end to end in a real browser: Chromium (test/helpers/browser.ts)
// driven by playwright-core. Sign in, browse to a table, run a vector query, watch an index build reach
// Succeeded, cancel a running build, see a 403 explained for a read-only key, and the server
// page's live chart. Screenshots of each page go to test-output/console/.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumLaunchOptions } from "./helpers/browser.js";
import { seedIndexTable } from "./helpers/index-data.js";
import { ADMIN_KEY, READ_KEY, serverForFile } from "./helpers/quiver.js";
import { until } from "./helpers/transactions.js";
import { paced } from "./helpers/pace.js";

const SHOTS = path.resolve(__dirname, "../test-output/console");

const q = serverForFile({
  args: ["--index-builds", "1"],
  seed: async (dataDir) => {
    await seedIndexTable(dataDir, "big", 20_000, 64);
    await seedIndexTable(dataDir, "small", 500, 8);
  },
});

let profile = "";
let context: BrowserContext;
let page: Page;
/** What the browser refused under the page's Content-Security-Policy, on any page. */
const refused: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(path.join(tmpdir(), "quiver-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    ...chromiumLaunchOptions(),
    headless: true,
    viewport: { width: 1280, height: 900 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  page.on("console", (m) => m.type() === "error" && /Content Security Policy/i.test(m.text()) && refused.push(m.text()));
  await q.call("POST", "/v1/namespace/analytics/create", { properties: { owner: "data team" } });
  await q.call("POST", "/v1/namespace/analytics$reports/create", {});
});

afterAll(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/**
 * `text` on the page once it is shown; if the console shows its error box instead, fail at once
 * saying what it says. Either way a failure carries the server's last log lines (a click's request
 * that failed or took long under load says why there).
 */
async function shown(text: string): Promise<void> {
  const error = page.locator("#error");
  const failed = (why: string) => new Error(`${why}\nserver log:\n${q.stderr().slice(-3000)}`);
  try {
    await page.getByText(text).or(error).filter({ visible: true }).first().waitFor({ timeout: paced(20_000) });
  } catch (err) {
    throw failed(String(err));
  }
  if (await error.isVisible()) throw failed(`the console showed an error instead of "${text}": ${await error.textContent()}`);
}

const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

async function signIn(key: string) {
  await page.goto(`${q.url}/console`);
  await page.getByLabel("API key").fill(key);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Namespaces and tables" }).waitFor();
}

describe("console", () => {
  it("is served from the same port, with its own files only", async () => {
    const r = await fetch(`${q.url}/console`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/html");
    expect(r.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await r.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect((await fetch(`${q.url}/console/app.js`)).status).toBe(200);
    const missing = await fetch(`${q.url}/console/nope.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { detail: string }).detail).toContain("nope.js");
  });

  it("the sign-in page: no nav bar, the help text under the key's input (the stylesheet's layout, no inline style)", async () => {
    await page.goto(`${q.url}/console`);
    await page.getByLabel("API key").waitFor();
    expect(await page.locator("#nav").evaluate((e) => getComputedStyle(e).display)).toBe("none");
    const [input, help] = await Promise.all([page.getByLabel("API key").boundingBox(), page.locator("#key-help").boundingBox()]);
    expect(await page.locator("#key-help").evaluate((e) => getComputedStyle(e).gridColumnStart)).toBe("2");
    // Under the input, in its column.
    expect(Math.abs(help!.x - input!.x)).toBeLessThan(2);
    expect(help!.y).toBeGreaterThan(input!.y);
  });

  it("signs in with an API key kept in sessionStorage (no cookie, not in the URL) and shows the namespace tree", async () => {
    await page.goto(`${q.url}/console`);
    await page.getByLabel("API key").fill("wrong-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.locator("#error").textContent()).toContain("401");
    // A kept key that stops working (revoked, or the server's keys changed) leads back to sign-in.
    await page.evaluate(() => sessionStorage.setItem("quiver.apiKey", "revoked-key"));
    await page.goto(`${q.url}/console#/jobs`);
    await page.reload();
    await page.getByLabel("API key").waitFor();
    await expect.poll(() => page.locator("#error").textContent()).toContain("Not signed in, or the key was not accepted (401)");
    expect(await page.evaluate(() => sessionStorage.getItem("quiver.apiKey"))).toBeNull();

    await signIn(ADMIN_KEY);
    expect(await page.evaluate(() => sessionStorage.getItem("quiver.apiKey"))).toBe(ADMIN_KEY);
    expect(await context.cookies()).toEqual([]);
    expect(page.url()).not.toContain(ADMIN_KEY);
    await page.getByRole("link", { name: /small/ }).waitFor();
    await page.getByRole("button", { name: "Expand analytics" }).click();
    await page.getByRole("button", { name: "reports", exact: true }).waitFor();
    await page.getByRole("button", { name: "analytics", exact: true }).click();
    await page.getByText("data team").waitFor();
    await shot("tables");
  });

  it("browses to a table: schema with nested fields, rows, stats, versions, indexes", async () => {
    await page.getByRole("link", { name: /small/ }).click();
    await page.getByRole("heading", { name: "Table small" }).waitFor();
    const schema = page.getByRole("table", { name: "Schema" });
    await schema.getByText("fixed_size_list<float32>[8]").first().waitFor();
    // `s` is a struct: its fields are listed under it.
    await schema.getByRole("cell", { name: "x", exact: true }).waitFor();
    // Nested fields are indented one step a level (1.2rem at 16px).
    expect(await schema.getByRole("cell", { name: "x", exact: true }).locator("code").evaluate((e) => getComputedStyle(e).paddingLeft)).toBe("19.2px");
    // The index form proposes a vector index of the vector column.
    expect(await page.getByLabel("Column").inputValue()).toBe("vec");
    expect(await page.getByLabel("Index type").inputValue()).toBe("IVF_PQ");
    await page.getByText("Rows: 500").waitFor();
    await page.getByRole("table", { name: "Versions" }).waitFor();
    await page.getByText("No indexes.").waitFor();
    await shot("table");
  });

  it("runs a vector query with a vector taken from a row and shows the rows with distances, and the curl command", async () => {
    await page.getByRole("link", { name: "Query this table" }).click();
    await page.getByRole("heading", { name: "Query playground" }).waitFor();
    await expect.poll(() => page.getByLabel("Vector column").inputValue()).toBe("vec");
    await page.getByRole("button", { name: "Take vector from row" }).click();
    await expect.poll(() => page.getByLabel("Vector (JSON array)").inputValue()).toMatch(/^\[-?\d/);
    await page.getByLabel("k (rows)").fill("5");
    await page.getByLabel("Columns").fill("id, cat, vec");
    await page.getByRole("button", { name: "Run query" }).click();
    const results = page.getByRole("table", { name: "Query results" });
    await results.waitFor();
    await page.getByText("5 rows").waitFor();
    expect(await results.locator("th").allTextContents()).toEqual(["id", "cat", "vec", "_distance"]);
    // Row 0's own vector is its nearest neighbour: distance 0.
    expect(await results.locator("tbody tr").first().locator("td").first().textContent()).toBe("0");
    const curl = await page.locator("#q-curl").textContent();
    expect(curl).toContain(`${q.url}/v1/table/small/query`);
    expect(curl).toContain('"k":5');
    expect(curl).toContain("$QUIVER_API_KEY");
    expect(curl).not.toContain(ADMIN_KEY);
    await shot("query");
  });

  it("starts an index build from the table page and watches it reach Succeeded on the jobs page", async () => {
    await page.goto(`${q.url}/console#/table/small`);
    await page.getByLabel("Column").selectOption("id");
    await page.getByLabel("Index type").selectOption("BTREE");
    await page.getByRole("button", { name: "Create index" }).click();
    await shown("Index build started as transaction");
    await page.getByRole("link", { name: "Follow it on the Jobs page" }).click();
    const row = page.locator("tr", { hasText: "small" }).filter({ hasText: "Index build" });
    await row.locator(".badge", { hasText: "Succeeded" }).waitFor({ timeout: 40_000 });
    expect(await row.locator("progress").getAttribute("value")).toBe("1");
    await shot("jobs");
  });

  it("runs maintenance from the table page's Maintain now button and shows it on the jobs page", async () => {
    await page.goto(`${q.url}/console#/table/small`);
    await page.getByRole("button", { name: "Maintain now" }).click();
    await shown("Maintenance started as job");
    await page.getByText("Maintenance started as job").getByRole("link", { name: "Follow it on the Jobs page" }).click();
    const row = page.locator("tr", { hasText: "small" }).filter({ hasText: "Maintenance" });
    await row.locator(".badge", { hasText: "Succeeded" }).waitFor({ timeout: 40_000 });
  });

  it("cancels a running build with the keyboard", async () => {
    const r = await q.call("POST", "/v1/table/big/create_index", { column: "vec", index_type: "IVF_HNSW_SQ", name: "slow", num_partitions: 1, m: 16, ef_construction: 150 });
    const tx = r.json.transaction_id as string;
    await until(q, tx, (s) => s === "Running");
    // On the jobs page whatever the test before left open.
    await page.goto(`${q.url}/console#/jobs`);
    const cancel = page.getByRole("button", { name: "Cancel Index build on big" });
    await cancel.waitFor();
    await cancel.focus();
    await page.keyboard.press("Enter");
    await page.getByRole("status").getByText("Index build on big canceled.").waitFor();
    await page.locator("tr", { hasText: "big" }).locator(".badge", { hasText: "Canceled" }).waitFor();
    expect((await q.call("POST", `/v1/transaction/${tx}/describe`, {})).json.status).toBe("Canceled");
  });

  it("shows in-flight requests, pool use and a live QPS / p99 chart from /metrics", async () => {
    await page.getByRole("link", { name: "Server" }).click();
    await page.getByRole("heading", { name: "Server" }).waitFor();
    // A second scrape gives a rate; requests made meanwhile give a p99.
    for (let i = 0; i < 20; i++) await q.call("POST", "/v1/table/small/count_rows", {});
    await expect.poll(() => page.locator("#chart-summary").textContent(), { timeout: 15_000 }).toMatch(/\d+\.\d requests\/s, p99 \d+\.\d ms/);
    await page.getByText("Pool threads busy").waitFor();
    // Busy of the pool's most threads (--workers), not of those started so far (none, at first).
    await expect.poll(() => page.locator(".card", { hasText: "Pool threads busy" }).textContent()).toMatch(/Pool threads busy\s*\d+ \/ [1-9]\d* \(\d+ started\)/);
    expect(await page.locator("svg.chart polyline").count()).toBe(2);
    await shot("server");
  });

  it("explains a 403 for a read-only key in words", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API key").waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("quiver.apiKey"))).toBeNull();
    await signIn(READ_KEY);
    await page.goto(`${q.url}/console#/table/small`);
    await page.getByLabel("Index type").selectOption("BTREE");
    await page.getByLabel("Column").selectOption("cat");
    await page.getByRole("button", { name: "Create index" }).click();
    const error = page.getByRole("alert");
    await expect.poll(() => error.textContent()).toContain("Not allowed (403): CreateTableIndex needs the write role; this credential has read");
    await shot("forbidden");
  });

  it("no page broke its Content-Security-Policy (no inline style or script refused)", () => {
    expect(refused).toEqual([]);
  });
});
