// Arrow values and plain JavaScript data, both ways, for UDFs and table functions: inputs become
// data built inside a sandbox, checked outputs become vectors of the declared type.
import type * as A from "apache-arrow";
import { arrow } from "../../src/engine/arrow.js";
import type { Plain, Sandbox } from "./sandbox.js";

const { Type } = arrow;

/** One Arrow value as plain data: 64-bit integers as numbers while exact, BigInt beyond. */
export function plain(v: unknown, t: A.DataType): Plain {
  if (v === null || v === undefined) return null;
  switch (t.typeId) {
    case Type.List:
    case Type.FixedSizeList: {
      const vec = v as A.Vector;
      const child = t.children[0].type;
      return Array.from({ length: vec.length }, (_, i) => plain(vec.get(i), child));
    }
    case Type.Struct: {
      const row = v as Record<string, unknown>;
      return Object.fromEntries(t.children.map((f: A.Field) => [f.name, plain(row[f.name], f.type)]));
    }
    case Type.Binary:
    case Type.LargeBinary:
    case Type.FixedSizeBinary:
      return Array.from(v as Uint8Array);
  }
  if (typeof v === "bigint") return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  if (v instanceof Date) return v.getTime();
  return v as Plain;
}

/** An input column as an array made inside the sandbox. */
export function column(v: A.Vector, sb: Sandbox): unknown[] {
  const out = sb.array(v.length);
  const t = v.type;
  const flat = (t.typeId === Type.Int && (t as A.Int).bitWidth <= 32) || t.typeId === Type.Float;
  if (flat) {
    const values = v.toArray() as ArrayLike<number>;
    for (let i = 0; i < v.length; i++) out[i] = v.nullCount > 0 && !v.isValid(i) ? null : values[i];
    return out;
  }
  for (let i = 0; i < v.length; i++) out[i] = sb.inside(plain(v.get(i), t));
  return out;
}

/** Values checked by the sandbox → a vector of the declared type. */
export function toVector(values: Plain[], type: A.DataType): A.Vector {
  const is64 = type.typeId === Type.Int && (type as A.Int).bitWidth === 64;
  if (is64) return arrow.vectorFromArray(values.map((x) => (x === null ? null : BigInt(x as number))), type);
  if (type.typeId === Type.Float && (type as A.Float).precision === arrow.Precision.DOUBLE && !values.includes(null)) {
    return arrow.makeVector(Float64Array.from(values as number[]));
  }
  return arrow.vectorFromArray(values, type);
}

