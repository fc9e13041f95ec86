// The small table the load-test harness's tests run against: `ns$docs`, 300 rows with an id, a
// text column under a full-text index, a price and an 8-dimension vector, made through the API.
import { expect } from "vitest";
import type { Quiver } from "./quiver.js";
import { settle } from "./transactions.js";

const WORDS = ["apple", "river", "quick", "brown", "fox", "summit", "piano", "willow"];

export async function seedLoadTable(q: Quiver): Promise<void> {
  let seed = 7;
  const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const rows = Array.from({ length: 300 }, (_, i) => ({
    id: i,
    text: Array.from({ length: 4 }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(" "),
    price: i * 1.5,
    vector: Array.from({ length: 8 }, rnd),
  }));
  expect((await q.call("POST", "/v1/namespace/ns/create", {})).status).toBe(200);
  expect((await q.call("POST", "/v1/table/ns$docs/create", rows)).status).toBe(200);
  const ix = await q.call("POST", "/v1/table/ns$docs/create_index", { column: "text", index_type: "FTS" });
  expect((await settle(q, ix.json.transaction_id)).status).toBe("Succeeded");
}
