// The owner's reader of a compute sandbox's bytes (workers/sandbox-channel.ts): answers to the
// tasks it gave, however the bytes are split; anything else a violation in words, found before
// the frame's body is kept, and no throw.
import { describe, expect, it } from "vitest";
import { ANSWER, answerFrame, answerReader, newTaskId, taskFrame, taskReader, type Answer, type Awaited } from "../../dist/workers/sandbox-channel.js";

const LIMITS = { outputBytes: 1 << 20, errorBytes: 1024 };
const bytes = (parts: Uint8Array[]) => Buffer.concat(parts);

function reader(tasks: Record<string, Awaited>) {
  const got: [string, Answer][] = [];
  let ready = 0;
  const r = answerReader(LIMITS, (id) => tasks[id] ?? null, { ready: () => ready++, answer: (id, a) => got.push([id, a]) });
  return { r, got, ready: () => ready };
}

describe("the sandbox channel's answer reader", () => {
  const run = newTaskId();
  const check = newTaskId();
  const stream = bytes([
    ...answerFrame(ANSWER.ready),
    ...answerFrame(ANSWER.output, run, Buffer.from("ipc bytes")),
    ...answerFrame(ANSWER.ok, check),
  ]);

  it("takes ready, an output and an ok, split at every byte or in one piece", () => {
    for (const step of [1, 2, 5, 17, stream.length]) {
      const { r, got, ready } = reader({ [run]: "output", [check]: "ok" });
      for (let i = 0; i < stream.length; i += step) expect(r.push(stream.subarray(i, i + step))).toBeNull();
      expect(ready()).toBe(1);
      expect(got.map(([id, a]) => [id, "output" in a ? Buffer.from(a.output).toString() : a])).toEqual([[run, "ipc bytes"], [check, { ok: true }]]);
    }
  });

  it("takes an error's text", () => {
    const { r, got } = reader({ [check]: "ok" });
    expect(r.push(bytes([...answerFrame(ANSWER.ready), ...answerFrame(ANSWER.error, check, Buffer.from("it failed"))]))).toBeNull();
    expect(got).toEqual([[check, { error: "it failed" }]]);
  });

  const ready = bytes(answerFrame(ANSWER.ready));
  const frame = (length: number, kind: number, id?: string) => {
    const b = Buffer.alloc(5);
    b.writeUInt32LE(length);
    b[4] = kind;
    return Buffer.concat([b, ...(id ? [Buffer.from(id, "hex")] : [])]);
  };
  const violations: [string, Buffer, RegExp][] = [
    ["v8.serialize(null) with its length (Node's IPC frame)", Buffer.from([0, 0, 0, 3, 0xff, 0x0f, 0x30]), /unknown kind 255/],
    ["[0,0,0,1,255]", Buffer.from([0, 0, 0, 1, 255]), /unknown kind 255/],
    ["a 4 GB output announced", frame(0xffffffff, ANSWER.output), /output frame of 4294967295 bytes/],
    ["an error longer than its bound", frame(1 + 16 + 1025, ANSWER.error), /error frame of 1042 bytes/],
    ["an empty frame", frame(0, ANSWER.ok), /ok frame of 0 bytes/],
    ["a second ready", frame(1, ANSWER.ready), /second `ready`/],
    ["a forged ok for a task it was not given", frame(17, ANSWER.ok, newTaskId()), /not given/],
    ["an output for a check", frame(17 + 3, ANSWER.output, check), /awaits none/],
  ];
  for (const [what, b, why] of violations) {
    it(`${what}: a violation, told before its body arrives`, () => {
      const { r, got } = reader({ [check]: "ok" });
      expect(r.push(ready)).toBeNull();
      expect(r.push(b)).toMatch(why);
      expect(got).toEqual([]);
    });
  }

  it("a first frame other than ready is a violation", () => {
    const { r } = reader({ [check]: "ok" });
    expect(r.push(bytes(answerFrame(ANSWER.ok, check)))).toMatch(/first frame is not `ready`/);
  });

  it("a task answered twice: the second answer is a violation", () => {
    const tasks: Record<string, Awaited> = { [check]: "ok" };
    const got: string[] = [];
    const r = answerReader(LIMITS, (id) => tasks[id] ?? null, { ready: () => undefined, answer: (id) => (got.push(id), delete tasks[id]) });
    expect(r.push(bytes([...answerFrame(ANSWER.ready), ...answerFrame(ANSWER.ok, check)]))).toBeNull();
    expect(r.push(bytes(answerFrame(ANSWER.ok, check)))).toMatch(/not given/);
    expect(got).toEqual([check]);
  });
});

describe("the sandbox's task reader", () => {
  it("gives each task's header and its input, in its own buffer, however the bytes are split", () => {
    const input = Buffer.from("arrow ipc bytes");
    const stream = bytes([...taskFrame({ id: "a", deadlineMs: 5 }, input), ...taskFrame({ id: "b", deadlineMs: 6 })]);
    for (const step of [1, 3, stream.length]) {
      const got: [unknown, string | undefined, number | undefined][] = [];
      const read = taskReader((h, i) => got.push([h, i && Buffer.from(i).toString(), i?.byteOffset]));
      for (let i = 0; i < stream.length; i += step) read(stream.subarray(i, i + step));
      expect(got).toEqual([[{ id: "a", deadlineMs: 5 }, "arrow ipc bytes", 0], [{ id: "b", deadlineMs: 6 }, undefined, undefined]]);
    }
  });
});
