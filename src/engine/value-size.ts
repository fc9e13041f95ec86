// One stored value's size, bounded by --max-value-bytes when a write computes it from SQL (an
// update's new values, an added column's expression, a cast's column). A bound on copies per
// expression alone compounds across writes: five `update s = repeat(s, 16)` made a 1 KiB value
// 1 GiB. The engine keeps no cheap figure of a column's largest value, so before the write
// commits, the rows it would write are counted by the engine where the expression's value
// measures past the bound (one scan of those rows, which builds each new value once, as the write
// itself does). Writes to a table take turns (Tables.write), so no other write on this server
// comes between the count and the commit.
import type * as A from "apache-arrow";
import { invalid } from "../errors.js";
import { literalElements, type SizeLimits } from "../schemas/expression-size.js";
import { arrow } from "./arrow.js";
import { dataError } from "./datasets.js";
import { widthOf } from "./ipc-in.js";
import { engineReason } from "./messages.js";
import type { TableHandle } from "./tables.js";

/** Bytes one fixed-width value of `t` holds, or null for a type whose values vary in size. */
function fixedBytes(t: A.DataType): number | null {
  const D = arrow.DataType;
  if (D.isUtf8(t) || D.isLargeUtf8(t) || D.isBinary(t) || D.isLargeBinary(t) || D.isList(t) || D.isMap(t)) return null;
  if (D.isFixedSizeList(t)) {
    const item = fixedBytes(t.children[0].type);
    return item === null ? null : item * (t as A.FixedSizeList).listSize;
  }
  if (D.isStruct(t)) {
    const parts = t.children.map((c) => fixedBytes(c.type));
    return parts.includes(null) ? null : (parts as number[]).reduce((a, b) => a + b, 0);
  }
  return widthOf(t);
}

/**
 * SQL for the bytes the value `expr` (of type `t`) holds: a string's or binary's bytes, a list's
 * items' (lists of lists flattened), a struct's fields'; a number when every value holds the
 * same; null where the engine has no measure (a list of structs or maps, a map).
 */
function measure(expr: string, t: A.DataType): string | number | null {
  const D = arrow.DataType;
  const fixed = fixedBytes(t);
  if (fixed !== null) return fixed;
  // Measured as the column stores it: a write casts a value of another type (a number, a list)
  // to the column's, as its text; a cast to the type it has already costs nothing.
  if (D.isUtf8(t) || D.isLargeUtf8(t)) return `coalesce(octet_length(arrow_cast(${expr}, '${D.isLargeUtf8(t) ? "LargeUtf8" : "Utf8"}')), 0)`;
  if (D.isBinary(t) || D.isLargeBinary(t)) return `coalesce(length(arrow_cast(${expr}, '${D.isLargeBinary(t) ? "LargeBinary" : "Binary"}')), 0)`;
  if (D.isStruct(t)) {
    const parts = t.children.map((c) => measure(`get_field(${expr}, '${c.name.replace(/'/g, "''")}')`, c.type));
    if (parts.includes(null)) return null;
    return parts.map(String).join(" + ");
  }
  if (D.isList(t) || D.isFixedSizeList(t)) {
    let items = expr;
    let leaf = t.children[0].type;
    while (D.isList(leaf) || D.isFixedSizeList(leaf)) {
      items = `flatten(${items})`;
      leaf = leaf.children[0].type;
    }
    const each = fixedBytes(leaf);
    if (each !== null) return `coalesce(cardinality(${items}), 0) * ${each}`;
    // Strings or binaries inside: the list's text form holds each of their bytes.
    if (D.isUtf8(leaf) || D.isLargeUtf8(leaf) || D.isBinary(leaf) || D.isLargeBinary(leaf)) return `coalesce(octet_length(arrow_cast(${expr}, 'Utf8')), 0)`;
  }
  return null;
}

export interface ValueLimits extends SizeLimits {
  maxValueBytes: number;
}

/**
 * 400 naming `column` (as `field`) when `valueSql`, written to column `column` of type `type`
 * in the rows `where` selects (all when undefined), would make a value of more than
 * `maxValueBytes`; checked before anything is written. A value of literals alone is sized from
 * its text; anything else is counted by the engine over the rows.
 */
export async function checkValueBound(t: TableHandle, field: string, column: string, type: A.DataType, valueSql: string, where: string | undefined, limits: ValueLimits): Promise<void> {
  const max = limits.maxValueBytes;
  const over = () => invalid(`${field}: column ${JSON.stringify(column)} would hold a value of more than ${max} bytes (--max-value-bytes); nothing was written`);
  // Newlines keep a trailing line comment of the expression inside its brackets.
  const m = measure(`(\n${valueSql}\n)`, type);
  if (typeof m === "number") {
    if (m > max) throw over();
    return;
  }
  // At most 4 bytes a character, 32 an item (a decimal).
  const literal = literalElements(valueSql, limits);
  if (literal !== null && literal * 32 <= max) return;
  if (m === null) {
    throw invalid(`${field}: column ${JSON.stringify(column)} is of type ${type}, whose values the engine cannot measure against --max-value-bytes, so it can be written from SQL only with literals`);
  }
  const filter = where ? `(\n${where}\n) AND (${m} > ${max})` : `${m} > ${max}`;
  let n: number;
  try {
    n = await t.countRows(filter);
  } catch (err) {
    // Values the engine cannot compute are the request's fault, whatever the engine calls them;
    // the write is refused, since an expression whose values go unmeasured would go unbounded.
    throw dataError(err, field) ?? invalid(`${field}: ${engineReason(err)}`);
  }
  if (n > 0) throw over();
}

/** The same bound for columns added from SQL (`name` = `valueSql` in every row), their type found by the engine from one row. */
export async function checkAddedValues(t: TableHandle, field: string, name: string, valueSql: string, limits: ValueLimits): Promise<void> {
  let type: A.DataType;
  try {
    type = (await t.query().select({ [name]: valueSql }).limit(1).toArrow()).schema.fields[0].type;
  } catch {
    // An expression the query planner refuses is left to add_columns, which refuses it in its
    // own words (the planners differ in what they say).
    return;
  }
  await checkValueBound(t, field, name, type, valueSql, undefined, limits);
}
