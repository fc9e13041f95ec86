// What the ingest pool moves to a worker must be a buffer of its own, never Node's shared pool.
import { describe, expect, it } from "vitest";
import { ownBuffer } from "../../src/util/own-buffer.js";

describe("ownBuffer", () => {
  it("copies a small Buffer out of Node's shared pool; a whole buffer is kept as it is", () => {
    const pooled = Buffer.from("a small request body");
    expect(pooled.byteLength).toBeLessThan(pooled.buffer.byteLength);
    const own = ownBuffer(pooled);
    expect(own.buffer).not.toBe(pooled.buffer);
    expect(own.byteLength).toBe(own.buffer.byteLength);
    expect(Buffer.from(own).toString()).toBe("a small request body");
    const whole = new Uint8Array(16);
    expect(ownBuffer(whole)).toBe(whole);
  });
});
