// Arrow schemas as upstream's JSON (JsonArrowSchema / JsonArrowDataType, lance-namespace `spec.yaml`).
// Output uses lance-namespace's vocabulary (what DescribeTable answers with), adding the unit
// and time zone where that vocabulary would lose them, or on request `lance::arrow::json`'s
// (for LanceDB's remote client); input accepts both vocabularies.
import type * as A from "apache-arrow";
import { invalid } from "../errors.js";
import { arrow } from "./arrow.js";

export interface JsonArrowDataType {
  type: string;
  fields?: JsonArrowField[];
  length?: number;
  /** A timestamp's time zone, as an alternative to naming it in `type` ("timestamp:us:UTC"). */
  timezone?: unknown;
}
export interface JsonArrowField {
  name: string;
  type: JsonArrowDataType;
  nullable: boolean;
  metadata?: Record<string, string>;
}
export interface JsonArrowSchema {
  fields: JsonArrowField[];
  metadata?: Record<string, string>;
}

const { Type, TimeUnit } = arrow;
const unitNames = ["s", "ms", "us", "ns"] as const;
const intervalNames = ["year_month", "day_time", "month_day_nano"] as const;

const metadataOf = (m: Map<string, string> | undefined) =>
  m && m.size > 0 ? Object.fromEntries(m) : undefined;

/** lance-namespace's names (DescribeTable per the spec), or `lance::arrow::json`'s, which LanceDB's
 *  remote client parses (`double`, `string`, `timestamp:us:-`, ...). */
export type Vocabulary = "namespace" | "lance";

export function toJsonSchema(schema: A.Schema, vocab: Vocabulary = "namespace"): JsonArrowSchema {
  const metadata = metadataOf(schema.metadata);
  return { fields: schema.fields.map((f) => toJsonField(f, vocab)), ...(metadata ? { metadata } : {}) };
}

export function toJsonField(f: A.Field, vocab: Vocabulary = "namespace"): JsonArrowField {
  const metadata = metadataOf(f.metadata);
  return { name: f.name, type: toJsonType(f.type, vocab), nullable: f.nullable, ...(metadata ? { metadata } : {}) };
}

/** The scalar types whose names differ in `lance::arrow::json`; null for the rest. */
function lanceName(t: A.DataType): string | null {
  const x = t as any;
  switch (t.typeId) {
    case Type.Float: return ["halffloat", "float", "double"][x.precision];
    case Type.Utf8: return "string";
    case Type.LargeUtf8: return "large_string";
    case Type.Date: return x.unit === arrow.DateUnit.DAY ? "date32:day" : "date64:ms";
    case Type.Timestamp: return `timestamp:${unitNames[x.unit]}:${x.timezone || "-"}`;
    case Type.Decimal: return `decimal:${x.bitWidth}:${x.precision}:${x.scale}`;
    default: return null;
  }
}

export function toJsonType(t: A.DataType, vocab: Vocabulary = "namespace"): JsonArrowDataType {
  const x = t as any;
  const field = (f: A.Field) => toJsonField(f, vocab);
  const lance = vocab === "lance" ? lanceName(t) : null;
  if (lance) return { type: lance };
  switch (t.typeId) {
    case Type.Null: return { type: "null" };
    case Type.Bool: return { type: "bool" };
    case Type.Int: return { type: `${x.isSigned ? "int" : "uint"}${x.bitWidth}` };
    case Type.Float: return { type: ["float16", "float32", "float64"][x.precision] };
    case Type.Utf8: return { type: "utf8" };
    case Type.LargeUtf8: return { type: "large_utf8" };
    case Type.Binary: return { type: "binary" };
    case Type.LargeBinary: return { type: "large_binary" };
    case Type.FixedSizeBinary: return { type: "fixed_size_binary", length: x.byteWidth };
    case Type.Date: return { type: x.unit === arrow.DateUnit.DAY ? "date32" : "date64" };
    case Type.Time: return { type: `time${x.bitWidth}:${unitNames[x.unit]}` };
    case Type.Timestamp:
      // Plain "timestamp" means microseconds without a time zone in lance-namespace's reader.
      if (x.unit === TimeUnit.MICROSECOND && !x.timezone) return { type: "timestamp" };
      return { type: `timestamp:${unitNames[x.unit]}${x.timezone ? `:${x.timezone}` : ""}` };
    case Type.Duration: return { type: `duration:${unitNames[x.unit]}` };
    case Type.Interval: return { type: `interval:${intervalNames[x.unit]}` };
    case Type.Decimal: return { type: `decimal${x.bitWidth}`, length: x.precision * 1000 + x.scale };
    case Type.List: return { type: "list", fields: [field(x.children[0])] };
    case Type.FixedSizeList: return { type: "fixed_size_list", fields: [field(x.children[0])], length: x.listSize };
    case Type.Struct: return { type: "struct", fields: x.children.map(field) };
    case Type.Map: return { type: "map", fields: [field(x.children[0])] };
    // A dictionary is an encoding of its value type.
    case Type.Dictionary: return toJsonType(x.dictionary, vocab);
    default: return { type: String(t).toLowerCase() };
  }
}

export function fromJsonSchema(s: JsonArrowSchema): A.Schema {
  const meta = s.metadata ? new Map(Object.entries(s.metadata)) : undefined;
  return new arrow.Schema(s.fields.map(fromJsonField), meta);
}

export function fromJsonField(f: JsonArrowField): A.Field {
  if (typeof f?.name !== "string") throw invalid(`field name: must be a string, got ${JSON.stringify(f?.name)}`);
  // Fields become properties of the objects rows are built in, where this name sets the prototype.
  if (f.name === "__proto__") throw invalid(`field name: "__proto__" cannot be a column or field name`);
  const meta = f.metadata ? new Map(Object.entries(f.metadata)) : undefined;
  return new arrow.Field(f.name, fromJsonType(f.type, f.name), f.nullable ?? true, meta);
}

const unitOf = (name: string | undefined, def: A.TimeUnit, what: string): A.TimeUnit => {
  if (name === undefined || name === "") return def;
  const aliases: Record<string, A.TimeUnit> = {
    s: TimeUnit.SECOND, second: TimeUnit.SECOND,
    ms: TimeUnit.MILLISECOND, millisecond: TimeUnit.MILLISECOND,
    us: TimeUnit.MICROSECOND, microsecond: TimeUnit.MICROSECOND,
    ns: TimeUnit.NANOSECOND, nanosecond: TimeUnit.NANOSECOND,
  };
  const u = aliases[name];
  if (u === undefined) throw invalid(`unknown time unit "${name}" in data type "${what}"`);
  return u;
};

const child = (json: JsonArrowDataType, what: string): A.Field => {
  const f = json.fields?.[0];
  if (!f) throw invalid(`data type "${what}" needs "fields" with its child field`);
  return fromJsonField(f);
};

const lengthOf = (json: JsonArrowDataType, what: string): number => {
  const n = json.length;
  if (!Number.isInteger(n) || (n as number) < 0) throw invalid(`data type "${what}" needs a non-negative integer "length"`);
  return n as number;
};

const decimal = (bits: number, precision: number, scale: number, what: string) => {
  if (!Number.isInteger(precision) || !Number.isInteger(scale) || precision < 1) {
    throw invalid(`data type "${what}": bad decimal precision/scale`);
  }
  return new arrow.Decimal(scale, precision, bits);
};

/** A timestamp's zone, from its `type` string or its `timezone` field (which must then agree). */
function timeZone(json: JsonArrowDataType, named: string | null, what: string): string | null {
  if (json.timezone === undefined || json.timezone === null) return named;
  if (typeof json.timezone !== "string" || json.timezone === "") throw invalid(`data type "${what}": "timezone" must be a non-empty string, e.g. "UTC" or "+01:00"`);
  if (named !== null && named !== json.timezone) throw invalid(`data type "${what}": "timezone" ${JSON.stringify(json.timezone)} differs from the zone in "type"`);
  return json.timezone;
}

/** An Arrow type from either JSON vocabulary, matched case-insensitively; `column` names the field in errors. */
export function fromJsonType(json: JsonArrowDataType, column?: string): A.DataType {
  if (!json || typeof json.type !== "string") {
    throw invalid(`data type${column ? ` of "${column}"` : ""}: must be an object with a string "type"`);
  }
  const what = json.type;
  const [head, ...rest] = what.toLowerCase().split(":");
  const unknown = () =>
    invalid(`unknown data type "${what}"${column ? ` for column "${column}"` : ""}`);
  switch (head) {
    case "null": return new arrow.Null();
    case "bool": case "boolean": return new arrow.Bool();
    case "int8": return new arrow.Int8();
    case "int16": return new arrow.Int16();
    case "int32": return new arrow.Int32();
    case "int64": return new arrow.Int64();
    case "uint8": return new arrow.Uint8();
    case "uint16": return new arrow.Uint16();
    case "uint32": return new arrow.Uint32();
    case "uint64": return new arrow.Uint64();
    case "float16": case "halffloat": return new arrow.Float16();
    case "float32": case "float": return new arrow.Float32();
    case "float64": case "double": return new arrow.Float64();
    case "utf8": case "string": return new arrow.Utf8();
    case "large_utf8": case "large_string": return new arrow.LargeUtf8();
    case "binary": return new arrow.Binary();
    case "large_binary": return new arrow.LargeBinary();
    case "fixed_size_binary": return new arrow.FixedSizeBinary(rest[0] ? Number(rest[0]) : lengthOf(json, what));
    case "date32": return new arrow.DateDay();
    case "date64": return new arrow.DateMillisecond();
    case "time32": return new arrow.Time(unitOf(rest[0], TimeUnit.MILLISECOND, what), 32 as any);
    case "time64": return new arrow.Time(unitOf(rest[0], TimeUnit.MICROSECOND, what), 64 as any);
    case "timestamp": {
      // The time zone may itself contain ':' (e.g. "+01:00").
      const named = rest.length > 1 ? what.split(":").slice(2).join(":") || null : null;
      return new arrow.Timestamp(unitOf(rest[0], TimeUnit.MICROSECOND, what), timeZone(json, named, what));
    }
    case "duration": return new arrow.Duration(unitOf(rest[0], TimeUnit.MICROSECOND, what));
    case "interval": {
      const u = intervalNames.indexOf((rest[0] ?? "month_day_nano") as any);
      if (u < 0) throw unknown();
      return new arrow.Interval(u as A.IntervalUnit);
    }
    case "decimal32": case "decimal64": case "decimal128": case "decimal256": {
      const code = lengthOf(json, what);
      return decimal(Number(head.slice(7)), Math.floor(code / 1000), code % 1000, what);
    }
    case "decimal": {
      // decimal:128:P:S, decimal:256:P:S or decimal:P:S
      const nums = rest.map(Number);
      if (nums.length === 3) return decimal(nums[0], nums[1], nums[2], what);
      if (nums.length === 2) return decimal(128, nums[0], nums[1], what);
      throw unknown();
    }
    case "list": return new arrow.List(child(json, what));
    case "fixed_size_list": return new arrow.FixedSizeList(rest[0] ? Number(rest[0]) : lengthOf(json, what), child(json, what));
    case "struct": return new arrow.Struct((json.fields ?? []).map(fromJsonField));
    case "map": return new arrow.Map_(child(json, what) as A.Field<A.Struct<any>>);
    default: throw unknown();
  }
}
