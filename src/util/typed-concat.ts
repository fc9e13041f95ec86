// Arrays of numbers one after another in one typed array (query vectors, a search's hits).

type Numbers = Int32Array | Float32Array;

/** `parts` in order in one `Make`; a single typed part of that kind is returned as it is. */
export function concatNumbers<T extends Numbers>(parts: ArrayLike<number>[], Make: { new (n: number): T }): T {
  if (parts.length === 1 && parts[0] instanceof Make) return parts[0];
  const out = new Make(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
