// The field path syntax (docs/contract.md): dot-separated segments; a segment holding a literal dot (or
// starting with a backtick) is backtick-quoted, with backticks inside doubled. A bare leaf name
// means a top-level field only. Invalid → 400 InvalidInput; unresolved → 404 TableColumnNotFound,
// both naming the canonical path.
import { ApiError, Code } from "../errors.js";

export function parseFieldPath(path: string, what = "field path"): string[] {
  const segs: string[] = [];
  let i = 0;
  const bad = (why: string) => new ApiError(Code.InvalidInput, `${what} ${JSON.stringify(path)} is invalid: ${why}`);
  if (path.length === 0) throw bad("empty");
  while (i <= path.length) {
    let seg = "";
    if (path[i] === "`") {
      i++;
      for (;;) {
        if (i >= path.length) throw bad("unterminated backtick");
        if (path[i] === "`") {
          if (path[i + 1] === "`") {
            seg += "`";
            i += 2;
            continue;
          }
          i++;
          break;
        }
        seg += path[i++];
      }
      if (i < path.length && path[i] !== ".") throw bad("text after a closing backtick");
    } else {
      while (i < path.length && path[i] !== ".") {
        if (path[i] === "`") throw bad("backtick inside an unquoted segment");
        seg += path[i++];
      }
    }
    if (seg.length === 0) throw bad("empty segment");
    segs.push(seg);
    if (i >= path.length) break;
    i++; // the dot
    if (i === path.length) throw bad("trailing dot");
  }
  return segs;
}

const quoteSegment = (s: string) => (/^[^.`]+$/.test(s) ? s : "`" + s.replace(/`/g, "``") + "`");

export const canonicalPath = (segs: readonly string[]) => segs.map(quoteSegment).join(".");

/** Minimal structural view of an Arrow field, so this works with either apache-arrow copy. */
export interface FieldLike {
  name: string;
  type: { children?: FieldLike[] | null; typeId?: number };
}

/**
 * Resolve a path against schema fields; descends into struct children.
 * Returns the segments and the field found.
 */
export function resolveFieldPath(fields: readonly FieldLike[], path: string, table: string, what = "column"): { segs: string[]; field: FieldLike } {
  const segs = parseFieldPath(path, what);
  let level: readonly FieldLike[] | null | undefined = fields;
  let found: FieldLike | undefined;
  for (const s of segs) {
    found = level?.find((f) => f.name === s);
    if (!found) {
      throw new ApiError(Code.TableColumnNotFound, `${what} ${JSON.stringify(canonicalPath(segs))} not found in table ${JSON.stringify(table)}`);
    }
    level = found.type.children;
  }
  return { segs, field: found! };
}
