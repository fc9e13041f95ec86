// Path matching for the route table: literal segments and `{param}` segments (one raw segment each).
// Trailing slashes are ignored; literal routes win over parameterised ones.

export interface Pattern<T> {
  method: string;
  path: string;
  value: T;
}

interface Compiled<T> {
  method: string;
  segments: { literal?: string; param?: string }[];
  value: T;
}

export type Match<T> =
  | { kind: "found"; value: T; params: Record<string, string> }
  | { kind: "wrong-method"; allowed: string[] }
  | { kind: "not-found" };

export function compileRoutes<T>(patterns: Pattern<T>[]) {
  const compiled: Compiled<T>[] = patterns
    .map((p) => ({
      method: p.method,
      value: p.value,
      segments: p.path
        .split("/")
        .filter(Boolean)
        .map((s) => (s.startsWith("{") ? { param: s.slice(1, -1) } : { literal: s })),
    }))
    // Fewer parameters first, so `/v1/table/version/batch-create` beats `/v1/table/{id}/create`.
    .sort((a, b) => a.segments.filter((s) => s.param).length - b.segments.filter((s) => s.param).length);
  const byLength = new Map<number, Compiled<T>[]>();
  for (const c of compiled) {
    const list = byLength.get(c.segments.length) ?? [];
    list.push(c);
    byLength.set(c.segments.length, list);
  }

  return function match(method: string, url: string): Match<T> {
    const parts = url.split("/").filter(Boolean);
    const candidates = byLength.get(parts.length) ?? [];
    const allowed: string[] = [];
    for (const c of candidates) {
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length && ok; i++) {
        const s = c.segments[i];
        if (s.literal !== undefined) ok = s.literal === parts[i];
        else params[s.param!] = parts[i];
      }
      if (!ok) continue;
      if (c.method === method) return { kind: "found", value: c.value, params };
      if (!allowed.includes(c.method)) allowed.push(c.method);
    }
    return allowed.length ? { kind: "wrong-method", allowed } : { kind: "not-found" };
  };
}
