// Arrow values as JSON, for clients that ask for rows as JSON (`Accept: application/json` or
// `application/x-ndjson`) rather than Arrow IPC. Each column type gets one converter, built once per
// result from its schema. The mapping (docs/api.md, "JSON rows"):
//   integers → numbers, except 64-bit ones beyond ±(2^53 − 1) → decimal strings (JSON numbers lose them);
//   floats → numbers, NaN and ±Infinity → the strings "NaN", "Infinity", "-Infinity";
//   binary → base64 strings; dates → "YYYY-MM-DD"; timestamps → ISO 8601 (with "Z" when the column
//   has a time zone; microsecond precision at most); lists and vectors → arrays; structs → objects;
//   maps → objects keyed by the map key; dictionaries → their values; anything else → its string form.
import type * as A from "apache-arrow";
import { arrow } from "./arrow.js";

type Convert = (v: unknown) => unknown;

const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

const int64: Convert = (v) => {
  const b = v as bigint;
  return b > MAX_EXACT || b < -MAX_EXACT ? b.toString() : Number(b);
};

const float: Convert = (v) => {
  const n = v as number;
  return Number.isFinite(n) ? n : String(n);
};

const base64: Convert = (v) => Buffer.from(v as Uint8Array).toString("base64");

const date: Convert = (v) => new Date(v as number).toISOString().slice(0, 10);

/** Milliseconds (fractional for finer units, as apache-arrow reads them) → ISO 8601. */
function timestamp(t: A.Timestamp): Convert {
  const fine = t.unit === arrow.TimeUnit.MICROSECOND || t.unit === arrow.TimeUnit.NANOSECOND;
  const zone = t.timezone ? "Z" : "";
  return (v) => {
    const ms = v as number;
    const whole = Math.floor(ms);
    const iso = new Date(whole).toISOString().slice(0, -1);
    const micros = fine ? String(Math.round((ms - whole) * 1000)).padStart(3, "0") : "";
    return iso + micros + zone;
  };
}

function list(item: Convert): Convert {
  return (v) => {
    const out: unknown[] = [];
    for (const x of v as Iterable<unknown>) out.push(x === null || x === undefined ? null : item(x));
    return out;
  };
}

function struct(fields: A.Field[]): Convert {
  const members = fields.map((f) => [f.name, converter(f.type)] as const);
  return (v) => {
    const row = v as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [name, c] of members) {
      const x = row[name];
      out[name] = x === null || x === undefined ? null : c(x);
    }
    return out;
  };
}

function map(t: A.Map_): Convert {
  const value = converter(t.valueType);
  return (v) => {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v as Iterable<[unknown, unknown]>) out[String(k)] = x === null || x === undefined ? null : value(x);
    return out;
  };
}

function converter(t: A.DataType): Convert {
  const D = arrow.DataType;
  if (D.isInt(t)) return (t as A.Int).bitWidth === 64 ? int64 : (v) => v;
  if (D.isFloat(t)) return float;
  if (D.isBool(t) || D.isUtf8(t) || D.isLargeUtf8(t)) return (v) => v;
  if (D.isBinary(t) || D.isLargeBinary(t) || D.isFixedSizeBinary(t)) return base64;
  if (D.isDate(t)) return date;
  if (D.isTimestamp(t)) return timestamp(t as A.Timestamp);
  if (D.isList(t) || D.isFixedSizeList(t)) return list(converter(t.children[0].type));
  if (D.isStruct(t)) return struct(t.children);
  if (D.isMap(t)) return map(t as A.Map_);
  if (D.isDictionary(t)) return converter((t as A.Dictionary).dictionary);
  return (v) => (typeof v === "bigint" ? int64(v) : String(v));
}

/** A function turning each row of a batch with this schema into a plain JSON-ready object. */
export function rowEncoder(schema: A.Schema): (batch: A.RecordBatch) => Record<string, unknown>[] {
  const cols = schema.fields.map((f) => [f.name, converter(f.type)] as const);
  return (batch) => {
    const vectors = cols.map((_, i) => batch.getChildAt(i)!);
    const rows: Record<string, unknown>[] = new Array(batch.numRows);
    for (let r = 0; r < batch.numRows; r++) {
      const row: Record<string, unknown> = {};
      for (let c = 0; c < cols.length; c++) {
        const v = vectors[c].get(r);
        row[cols[c][0]] = v === null || v === undefined ? null : cols[c][1](v);
      }
      rows[r] = row;
    }
    return rows;
  };
}
