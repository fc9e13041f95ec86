// Mode strings (namespace and table modes, statuses, operators) are matched case-insensitively in
// PascalCase or snake_case: `ExistOk`, `exist_ok` and `existok` are one value.
const norm = (s: string) => s.toLowerCase().replace(/_/g, "");

/** The allowed spelling `raw` names, or undefined when it names none. */
export function matchMode<V extends string>(raw: string, allowed: readonly V[]): V | undefined {
  const n = norm(raw);
  return allowed.find((a) => norm(a) === n);
}
