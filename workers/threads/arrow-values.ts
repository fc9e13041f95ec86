// Arrow values and plain JavaScript data, both ways, for UDFs and table functions: inputs become
// data built inside a sandbox, checked outputs become vectors of the declared type.
import type * as A from "apache-arrow";
import { arrow } from "../../src/engine/arrow.js";
import type { Plain, Sandbox } from "./sandbox.js";

const { Type } = arrow;

/** One Arrow value as plain data: 64-bit integers as numbers while exact, BigInt beyond; binary as numbers, or as bytes with `bytes`. */
export function plain(v: unknown, t: A.DataType, bytes = false): Plain {
  if (v === null || v === undefined) return null;
  switch (t.typeId) {
    case Type.List:
    case Type.FixedSizeList: {
      const vec = v as A.Vector;
      const child = t.children[0].type;
      return Array.from({ length: vec.length }, (_, i) => plain(vec.get(i), child, bytes));
    }
    case Type.Struct: {
      const row = v as Record<string, unknown>;
      return Object.fromEntries(t.children.map((f: A.Field) => [f.name, plain(row[f.name], f.type, bytes)]));
    }
    case Type.Binary:
    case Type.LargeBinary:
    case Type.FixedSizeBinary:
      return bytes ? (v as Uint8Array).slice() : Array.from(v as Uint8Array);
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
  for (let i = 0; i < v.length; i++) out[i] = sb.inside(plain(v.get(i), t, sb.bytes));
  return out;
}

const isInt64 = (t: A.DataType) => t.typeId === Type.Int && (t as A.Int).bitWidth === 64;

/** A checked value with its 64-bit integers as BigInt at any depth (a sandbox gives exact ones as numbers). */
function withBigInts(v: Plain, t: A.DataType): Plain {
  if (v === null) return v;
  if (isInt64(t)) return BigInt(v as number);
  if (t.typeId === Type.List || t.typeId === Type.FixedSizeList) return (v as Plain[]).map((x) => withBigInts(x, t.children[0].type));
  if (t.typeId === Type.Struct) return Object.fromEntries(t.children.map((f: A.Field) => [f.name, withBigInts((v as { [k: string]: Plain })[f.name] ?? null, f.type)]));
  return v;
}

const hasInt64 = (t: A.DataType): boolean => isInt64(t) || (t.children ?? []).some((f: A.Field) => hasInt64(f.type));

/** Values checked by the sandbox → a vector of the declared type. */
export function toVector(values: Plain[], type: A.DataType): A.Vector {
  if (hasInt64(type)) return arrow.vectorFromArray(values.map((x) => withBigInts(x, type)), type);
  if (type.typeId === Type.Float && (type as A.Float).precision === arrow.Precision.DOUBLE && !values.includes(null)) {
    return arrow.makeVector(Float64Array.from(values as number[]));
  }
  return arrow.vectorFromArray(values, type);
}

