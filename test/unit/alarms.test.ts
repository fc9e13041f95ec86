// One timer serves every alarm (src/util/alarms.ts): each rings once its time has passed, never
// before, in time order whatever the order they were set in, and a cleared one never rings.
import { describe, expect, it } from "vitest";
import { clearAlarm, setAlarm } from "../../src/util/alarms.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("alarms", () => {
  it("ring in time order, none before its time, a cleared one never; one set sooner than those waiting re-arms the timer", async () => {
    const rang: { name: string; late: number }[] = [];
    const start = performance.now();
    const set = (name: string, ms: number) => setAlarm(start + ms, () => rang.push({ name, late: performance.now() - (start + ms) }));
    set("300", 300);
    set("120", 120);
    const cleared = set("200", 200);
    set("250", 250);
    clearAlarm(cleared);
    clearAlarm(cleared);
    await sleep(20);
    // Sooner than every alarm waiting: the timer armed for 120 ms must not hold it.
    set("60", 60);
    await sleep(400);
    expect(rang.map((r) => r.name)).toEqual(["60", "120", "250", "300"]);
    for (const r of rang) expect(r.late).toBeGreaterThanOrEqual(0);
  });

  it("after every alarm is cleared, a later one still rings", async () => {
    const a = setAlarm(performance.now() + 50, () => expect.unreachable("cleared"));
    clearAlarm(a);
    let rang = false;
    setAlarm(performance.now() + 100, () => (rang = true));
    await sleep(250);
    expect(rang).toBe(true);
  });
});
