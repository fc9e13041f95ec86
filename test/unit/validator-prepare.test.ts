// Validators compile on first use unless prepared: the data path's are prepared in idle turns right
// after listening (src/main.ts), since compiling the search body's held the event loop ~50 ms at
// the first search after a start.
import { Type } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { dataPathValidators, routes } from "../../src/routes.js";
import { compile, compileBody, compileParams, prepareInTurns } from "../../src/schemas/validate.js";

// ajv refuses this type when it compiles the schema: where that throws shows when compilation happens.
const broken = { type: "object", properties: { a: { type: "nonsense" } } } as unknown as ReturnType<typeof Type.Object>;
const turn = () => new Promise<void>((r) => setImmediate(r));

describe("validators prepared ahead", () => {
  it("compile only at prepare() or first use, whichever comes first", () => {
    for (const make of [() => compile(broken), () => compileBody(broken), () => compileParams(broken)]) {
      const v = make();
      expect(() => v.prepare()).toThrow(/nonsense/);
    }
    const v = compile(broken);
    expect(() => v({ a: 1 })).toThrow(/nonsense/);
  });

  it("prepareInTurns prepares one validator an event-loop turn, in order", async () => {
    const done: number[] = [];
    prepareInTurns([0, 1, 2].map((i) => ({ prepare: () => void done.push(i) })));
    expect(done).toEqual([]);
    await turn();
    expect(done).toEqual([0]);
    await turn();
    await turn();
    expect(done).toEqual([0, 1, 2]);
  });

  it("the data path's are the search's body validator and the writes' and count's validators", () => {
    const of = (name: string) => routes.find((r) => r.value.name === name)!.value.op;
    const got = dataPathValidators();
    expect(got).toContain(of("QueryTable").validate);
    expect(got).toContain(of("CountTableRows").validate);
    expect(got).toContain(of("InsertIntoTable").args);
    expect(got).toContain(of("MergeInsertIntoTable").args);
    for (const v of got) expect(() => v.prepare()).not.toThrow();
  });
});
